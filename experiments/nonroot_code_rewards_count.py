# The code verifier's `crash` flag is also a program's own error: a completion that does not compile
# crashes. A completion that compiles prints a number or nothing and exits 0: `crash` there is the
# sandbox failing the job (as a fork refused by RLIMIT_NPROC did).
import ast, json, sys
import pyarrow.parquet as pq
for w in sys.argv[1:]:
    n = {"compiles": 0, "compiles_crash": 0, "no_compile": 0, "no_compile_crash": 0}
    for r in pq.read_table(f"{w}/run/completions.parquet").to_pylist():
        try:
            ast.parse(r["completion"]); key = "compiles"
        except SyntaxError:
            key = "no_compile"
        flags = r.get("flags") or []
        flags = json.loads(flags) if isinstance(flags, str) else flags
        n[key] += 1
        n[key + "_crash"] += "crash" in flags
    print(w, n)
