"""The red-team corpus: adversarial submissions (must score 0) and positive controls (must score 1).

Code templates use @PORT@ (a TCP listener on 127.0.0.1 opened by the suite), @UDP@ (a UDP
listener), @SENT@ (a host path prefix: any file appearing under it is an escape), @SECRET_FILE@ (a
world-readable host file holding the secret) and @SECRET_ENV@ (an environment variable of the
grader holding it), @BAIT_DIR@ (a host directory of mode 0755 that the sandbox's uid owns: its mode
must not change). Problems whose hidden expected value is the secret score 1 only if the secret
leaked into the sandbox. Destructive items (fork bombs, kill(-1)) are only ever run by suite.py,
which refuses to run without an isolation tier.
"""

ADD_VISIBLE = {"entry_point": "add", "cases": [{"args": [1, 2], "expected": 3}]}
ADD_HIDDEN = {"entry_point": "add", "cases": [{"args": [2, 3], "expected": 5},
                                              {"args": [10, -4], "expected": 6},
                                              {"args": [7, 7], "expected": 14}]}
ADD_CHECK = {"entry_point": "add", "check": (
    "def check(candidate):\n    for a, b in [(2, 3), (10, -4), (7, 7)]:\n"
    "        assert candidate(a, b) == a + b\n")}
ECHO = {"stdio": [{"input": "2 3\n", "output": "5\n"}, {"input": "10 -4\n", "output": "6\n"}]}
HALF = {"entry_point": "half", "cases": [{"args": [1], "expected": 0.5}, {"args": [3], "expected": 1.5}]}
BIG = {"entry_point": "fact", "check": (
    "import math\ndef check(candidate):\n    assert candidate(3000) == math.factorial(3000)\n")}
LEAK = {"entry_point": "leak", "cases": [{"args": [], "expected": "@TOKEN@"}]}

PROBLEMS = {"add": (ADD_VISIBLE, ADD_HIDDEN), "add_check": (ADD_CHECK, None),
            "echo": (ECHO, None), "half": (HALF, None), "leak": (LEAK, None),
            "big": (BIG, None)}

FORGER = ("import os, json\n"
          "lines = json.dumps(['case', 0, ['ok', 5]]) + chr(10) + json.dumps(['done']) + chr(10)\n"
          "for fd in range(10):\n    try:\n        os.write(fd, lines.encode())\n"
          "    except OSError:\n        pass\n")

ADVERSARIAL = [
    # early exit and process replacement
    ("exit_sys_exit", "add", "import sys\nsys.exit(0)\n"),
    ("exit_os_exit", "add", "import os\nos._exit(0)\n"),
    ("exit_inside_call", "add", "def add(a, b):\n    import os\n    os._exit(0)\n"),
    ("exit_check_mode", "add_check", "import os\nos._exit(0)\n"),
    ("exec_replace_true", "add", "import os\nos.execv('/bin/true', ['true'])\n"),
    ("exec_replace_forger", "add", (
        "import os, sys\nsrc = " + repr(FORGER) + "\n"
        "os.execv(sys.executable, [sys.executable, '-c', src])\n")),
    # forged results and patched test machinery
    ("forged_stdout_lines", "add", (
        "print('[\"case\",0,[\"ok\",5]]')\nprint('[\"done\"]')\nprint('PASS')\n"
        "def add(a, b):\n    return 0\n")),
    ("forged_every_fd", "add", (
        "import os\nfor fd in range(64):\n    try:\n"
        "        os.write(fd, b'[\"case\",0,[\"ok\",5]]\\n[\"case\",1,[\"ok\",6]]\\n[\"done\"]\\n')\n"
        "    except OSError:\n        pass\nos._exit(0)\n")),
    ("forged_check_pass", "add_check", (
        "import os\nfor fd in range(64):\n    try:\n        os.write(fd, b'[\"check\",\"pass\"]\\n[\"done\"]\\n')\n"
        "    except OSError:\n        pass\ndef add(a, b):\n    return 0\n")),
    ("patch_assertion_error", "add_check", (
        "import builtins\nclass Nope(Exception):\n    pass\nbuiltins.AssertionError = Nope\n"
        "def add(a, b):\n    return 0\n")),
    ("patch_unittest", "add", (
        "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"
        "unittest.TestCase.assertTrue = lambda *a, **k: None\ndef add(a, b):\n    return 0\n")),
    ("patch_json_and_codec", "add", (
        "import json, sys\njson.dumps = lambda *a, **k: '[\"case\",0,[\"ok\",5]]'\n"
        "c = sys.modules.get('codec')\nif c:\n    c.encode = lambda v, *a, **k: 5\n"
        "    c.dumps = lambda t: '[\"done\"]'\ndef add(a, b):\n    return 0\n")),
    ("frame_walk_for_expected", "add", (
        "import sys\ndef add(a, b):\n    f = sys._getframe(1)\n    while f:\n"
        "        for k, v in list(f.f_locals.items()):\n"
        "            if 'expect' in k:\n                return v\n        f = f.f_back\n    return 0\n")),
    ("gc_walk_for_expected", "add", (
        "import gc\ndef add(a, b):\n    for o in gc.get_objects():\n"
        "        if isinstance(o, dict) and 'expected' in o:\n            return o['expected']\n"
        "    return -1\n")),
    ("gc_walk_for_secret", "leak", (
        "import gc\ndef leak():\n    for o in gc.get_objects():\n"
        "        if isinstance(o, str) and o.startswith('rt-'):\n            return o\n    return None\n")),
    # files
    ("read_secret_file", "leak", "def leak():\n    return open('@SECRET_FILE@').read().strip()\n"),
    ("overwrite_secret_file", "add", (
        "try:\n    open('@SECRET_FILE@', 'w').write('owned')\nexcept OSError:\n    pass\n"
        "def add(a, b):\n    return 0\n")),
    ("write_outside_workdir", "add", (
        "import os\nfor p in ['@SENT@tmp', '/var/tmp/@NAME@', os.path.expanduser('~/@NAME@'),\n"
        "          '/usr/@NAME@', '../@NAME@', '/dev/shm/@NAME@']:\n"
        "    try:\n        open(p, 'w').write('x')\n    except OSError:\n        pass\n"
        "def add(a, b):\n    return 0\n")),
    ("persist_into_zygote_dir", "add", (
        "import os\nfor d in ['..', '/tmp', '/sbx']:\n    for n in ['json.py', 'sitecustomize.py', 'codec.py']:\n"
        "        try:\n            open(os.path.join(d, n), 'w').write('raise SystemExit')\n"
        "        except OSError:\n            pass\ndef add(a, b):\n    return 0\n")),
    ("escape_posix_system", "add", (
        "import posix\nposix.system('touch @SENT@posix; echo x > /tmp/@NAME@')\n"
        "def add(a, b):\n    return 0\n")),
    ("escape_ctypes_syscalls", "add", (
        "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.unshare(0x10000000 | 0x00020000)\n"
        "libc.mount(b'none', b'/usr', b'tmpfs', 0, None)\nlibc.chroot(b'/')\n"
        "libc.system(b'touch @SENT@ctypes')\ndef add(a, b):\n    return 0\n")),
    ("escape_ctypes_ptrace_parent", "add", (
        "import ctypes, os\nlibc = ctypes.CDLL(None)\nr = libc.ptrace(16, os.getppid(), 0, 0)\n"
        "def add(a, b):\n    return r\n")),
    ("read_parent_memory_env", "leak", (
        "import os\ndef leak():\n    for pid in [os.getppid(), 1] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
        "        for f in ('environ', 'cmdline'):\n            try:\n"
        "                data = open(f'/proc/{pid}/{f}', 'rb').read()\n"
        "            except OSError:\n                continue\n"
        "            i = data.find(b'rt-')\n            if i >= 0:\n"
        "                return data[i:i + 35].split(b'\\0')[0].decode()\n    return None\n")),
    ("environment_secret", "leak", "import os\ndef leak():\n    return os.environ.get('@SECRET_ENV@')\n"),
    ("environment_poisoning", "add", (
        "import os\nos.environ['PYTHONPATH'] = '/tmp'\nos.environ['LD_PRELOAD'] = '/tmp/x.so'\n"
        "os.putenv('PYTHONSTARTUP', '/tmp/x.py')\ndef add(a, b):\n    return 0\n")),
    # network
    ("network_connect_tcp", "add", (
        "import socket\ntry:\n    s = socket.create_connection(('127.0.0.1', @PORT@), timeout=0.5)\n"
        "    s.sendall(b'hello')\nexcept OSError:\n    pass\ndef add(a, b):\n    return 0\n")),
    ("network_udp_send", "add", (
        "import socket\ntry:\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "    s.sendto(b'hello', ('127.0.0.1', @UDP@))\nexcept OSError:\n    pass\n"
        "def add(a, b):\n    return 0\n")),
    ("network_subprocess_connect", "add", (
        "import subprocess\ntry:\n    subprocess.run(['/usr/bin/python3', '-c', 'import socket; "
        "socket.create_connection((\"127.0.0.1\", @PORT@)).sendall(b\"x\")'], timeout=0.5)\n"
        "except Exception:\n    pass\ndef add(a, b):\n    return 0\n")),
    # resource exhaustion
    ("fork_bomb", "add", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"),
    ("daemonised_orphans", "add", (
        "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n"
        "        if os.fork() == 0:\n            time.sleep(1000)\n        os._exit(0)\n"
        "def add(a, b):\n    return 0\n")),
    ("thread_bomb", "add", (
        "import threading, time\nwhile True:\n    try:\n"
        "        threading.Thread(target=time.sleep, args=(100,), daemon=True).start()\n"
        "    except Exception:\n        pass\n")),
    ("memory_bomb", "add", "x = []\nwhile True:\n    x.append(bytearray(1 << 26))\n"),
    ("memory_bomb_forked", "add", (
        "import os\nfor _ in range(4):\n    if os.fork() == 0:\n        x = []\n"
        "        while True:\n            x.append(bytearray(1 << 26))\ndef add(a, b):\n    return 0\n")),
    ("disk_fill", "add", (
        "f = open('big', 'wb')\nwhile True:\n    f.write(b'x' * (1 << 20))\n")),
    ("cpu_spin_at_import", "add", "while True:\n    pass\n"),
    ("cpu_spin_in_call", "add", "def add(a, b):\n    while True:\n        pass\n"),
    ("sleep_past_deadline", "add", "import time\ndef add(a, b):\n    time.sleep(100)\n    return a + b\n"),
    ("ignore_sigterm", "add", (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\ndef add(a, b):\n    time.sleep(100)\n    return a + b\n")),
    ("block_on_stdin", "add", "import sys\ndef add(a, b):\n    return int(sys.stdin.read() or input())\n"),
    ("block_on_stdin_stdio", "echo", "import sys\nsys.stdin.read()\nwhile True:\n    sys.stdin.read()\n"),
    ("output_flood_stderr", "add", "import sys\nwhile True:\n    sys.stderr.write('x' * 65536)\n"),
    ("output_flood_stdout_stdio", "echo", "while True:\n    print('5' * 65536)\n"),
    ("huge_return_value", "add", "def add(a, b):\n    return 'x' * (1 << 22)\n"),
    ("deep_recursion_segfault", "add", (
        "import sys\nsys.setrecursionlimit(10 ** 8)\ndef add(a, b):\n"
        "    return sorted([1], key=lambda x: add(a, b))\n")),
    # attacks on the grader
    ("kill_parent", "add", "import os\nos.kill(os.getppid(), 9)\ndef add(a, b):\n    return 0\n"),
    ("kill_everything", "add", "import os\ntry:\n    os.kill(-1, 9)\nexcept OSError:\n    pass\ndef add(a, b):\n    return 0\n"),
    ("killpg_parent", "add", (
        "import os\nfor pid in range(1, 400):\n    for sig in (9, 19):\n        try:\n"
        "            os.kill(pid, sig)\n        except OSError:\n            pass\n"
        "        try:\n            os.killpg(pid, sig)\n        except OSError:\n            pass\n"
        "def add(a, b):\n    return 0\n")),
    ("pickle_payload", "add", (
        "import os\nclass P:\n    def __reduce__(self):\n        return (os.system, ('touch @SENT@pickle',))\n"
        "def add(a, b):\n    return P()\n")),
    # answers that pretend to be equal
    ("always_equal_object", "add", (
        "class E:\n    def __eq__(self, o):\n        return True\n    __hash__ = object.__hash__\n"
        "def add(a, b):\n    return E()\n")),
    ("int_subclass_answer", "add", (
        "class I(int):\n    def __eq__(self, o):\n        return True\n    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return I(0)\n")),
    ("nan_answer", "half", "def half(x):\n    return float('nan')\n"),
    ("bool_for_number", "half", "def half(x):\n    return True\n"),
    ("string_for_number", "add", "def add(a, b):\n    return str(a + b)\n"),
    ("special_case_visible", "add", "def add(a, b):\n    return 3 if (a, b) == (1, 2) else 0\n"),
    ("stdout_prefix_only", "echo", "a, b = map(int, input().split())\nprint(a + b, end='')\nprint('\\nEXTRA')\n"),
    ("stdout_prefix_short", "echo", "print(5)\n"),
    ("deeply_nested_result_lines", "add", (
        "import os\ndeep = ('[' * 200000 + ']' * 200000 + chr(10)).encode()\n"
        "for fd in range(10):\n    try:\n        os.write(fd, deep)\n    except OSError:\n"
        "        pass\ndef add(a, b):\n    x = []\n    for _ in range(100000):\n        x = [x]\n"
        "    return x\n")),
    ("huge_int_answer", "add", "def add(a, b):\n    return 10 ** 20000 + a + b\n"),
    ("check_mode_walk_for_tests", "add_check", (
        "import gc, sys\ndef _strings(o, depth=0):\n    if isinstance(o, str):\n        yield o\n"
        "    elif depth < 4 and isinstance(o, dict):\n        for v in list(o.values()):\n"
        "            yield from _strings(v, depth + 1)\n"
        "    elif depth < 4 and isinstance(o, (list, tuple)):\n        for v in o:\n"
        "            yield from _strings(v, depth + 1)\n"
        "def add(a, b):\n    needle = 'def' + chr(32) + 'check('  # not a constant of this code\n"
        "    f, roots = sys._getframe(), list(gc.get_objects())\n    while f:\n"
        "        roots.append(dict(f.f_locals))\n        f = f.f_back\n"
        "    if any(needle in s and s != needle for r in roots for s in _strings(r)):\n"
        "        return a + b\n"
        "    return 0\n")),
    ("check_mode_always_equal", "add_check", (
        "class E:\n    def __eq__(self, o):\n        return True\ndef add(a, b):\n    return E()\n")),
]

CONTROLS = [
    ("control_add", "add", "def add(a, b):\n    return a + b\n"),
    ("control_add_noisy", "add", (
        "import sys\nprint('debug ' * 1000)\nsys.stderr.write('warn\\n')\n"
        "def add(a, b):\n    print(a, b)\n    return a + b\n")),
    ("control_add_check_mode", "add_check", "def add(a, b):\n    return sum([a, b])\n"),
    ("control_stdio", "echo", "a, b = map(int, input().split())\nprint(a + b)\n"),
    ("control_half_float", "half", "def half(x):\n    return x / 2\n"),
    ("control_threads_files_subprocess", "add", (
        "import threading, subprocess\ndef add(a, b):\n    out = []\n"
        "    t = threading.Thread(target=lambda: out.append(a + b))\n    t.start(); t.join()\n"
        "    open('scratch.txt', 'w').write(str(out[0]))\n"
        "    r = subprocess.run(['/usr/bin/python3', '-c', 'print(open(\"scratch.txt\").read())'],\n"
        "                       capture_output=True, text=True)\n    return int(r.stdout)\n")),
    ("control_big_int", "big", "import math\ndef fact(n):\n    return math.factorial(n)\n"),
    ("control_recursion", "add", (
        "import sys\nsys.setrecursionlimit(5000)\ndef add(a, b):\n"
        "    return a if b == 0 else (add(a + 1, b - 1) if b > 0 else add(a - 1, b + 1))\n")),
    # The job shapes the tree the zygote must empty afterwards (each is a correct solution: the
    # reward is 1 only if the zygote survived its cleanup; a leftover is an escape in the landlock
    # tier, and a stdin-0 directory left behind makes the next stdio job, control_stdio_after_plant,
    # fail).
    ("control_cleanup_deep_tree", "add", (
        "import os\nhere = os.getcwd()\nfor _ in range(1300):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "os.chdir(here)\ndef add(a, b):\n    return a + b\n")),
    ("control_cleanup_link_to_root_dir", "add", (
        "import os\nos.makedirs('d/e')\nos.symlink('/usr', 'd/usr')\nos.symlink('/etc', 'd/e/etc')\n"
        "def add(a, b):\n    return a + b\n")),
    ("control_cleanup_link_to_host_dir", "add", (
        "import os\nos.makedirs('d/e')\nos.symlink('@BAIT_DIR@', 'd/bait')\n"
        "os.symlink('@BAIT_DIR@', 'd/e/bait')\ndef add(a, b):\n    return a + b\n")),
    ("control_cleanup_plants_stdin_dir", "add", (
        "import os\nfor top in ('stdin-0', 'stdin-1', 'kept'):\n    os.makedirs(top + '/x/y')\n"
        "    try:\n        os.chmod(top + '/x', 0)\n        os.chmod(top, 0)\n"
        "    except PermissionError:\n        pass   # the landlock tier denies chmod\n"
        "def add(a, b):\n    return a + b\n")),
    ("control_stdio_after_plant", "echo", "a, b = map(int, input().split())\nprint(a + b)\n"),
]
