"""`rlvr quickstart | train | sft | eval | verify | report`: parse, build config, call one function.

Bad input (config, data, paths) is reported as one line naming what is wrong and where, with exit
status 2 and no traceback (unless --debug). Nothing is written to a run directory before the whole
setup has been validated.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from rlvr.errors import UserError


def _cmd_quickstart(args: argparse.Namespace) -> int:
    from rlvr.cli.quickstart import quickstart
    from rlvr.report.html import write_report

    if args.model == "smollm2":
        from rlvr.cli.quickstart_real import quickstart_real
        if args.config:
            raise UserError("--config: the real-model quickstart runs the smollm2 preset; change it "
                              "with key=value overrides, or run `rlvr train smollm2 ...`")
        run_dir = Path(quickstart_real(args.overrides)["run_dir"])
        print(f"report: {write_report(run_dir)}")
        return 0
    summary = quickstart(args.config, args.overrides, stop_accuracy=args.stop_accuracy)
    run_dir = Path(summary["run_dir"])
    if not args.no_eval:
        from rlvr.cli.eval import run_eval
        print("test-time compute: pass@k, maj@k, temperature and thinking-budget curves (200 problems)")
        run_eval(build_parser().parse_args(
            ["eval", str(run_dir / "final"), "--out", str(run_dir / "eval"), "--n", "200",
             "--temperatures", "0.6,1.0"]))
    path = write_report(run_dir)
    print(f"report: {path}")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from rlvr import config
    from rlvr.train import train

    overrides = list(args.overrides)
    if args.resume:
        overrides.append(f"run.resume={args.resume}")
    if args.strict_rewards:
        overrides.append("run.strict_rewards=true")
    cfg = config.load(args.config, overrides)
    summary = train(cfg)
    from rlvr.training.distributed import is_main
    if not is_main():   # under torchrun rank 0 reports and writes every file
        return 0
    accuracy = summary["final_accuracy"]
    if accuracy is None:   # no held-out set: say so rather than print "None"
        print(f"no held-out evaluation (no data.eval_path, or data.heldout_size=0); run dir: {cfg.run.dir}")
    else:
        print(f"final held-out accuracy: {accuracy}; run dir: {cfg.run.dir}")
    if cfg.run.report:
        from rlvr.report.html import write_report
        print(f"report: {write_report(Path(cfg.run.dir))}")
    return 0


def _cmd_sft(args: argparse.Namespace) -> int:
    from rlvr.cli.sft import run_sft
    return run_sft(args)


def _cmd_eval(args: argparse.Namespace) -> int:
    from rlvr.cli.eval import run_eval
    return run_eval(args)


def _cmd_report(args: argparse.Namespace) -> int:
    from rlvr.report.html import write_report

    run_dir = Path(args.run_dir)
    if not (run_dir / "metrics.jsonl").is_file() and not (run_dir / "verdict.md").is_file():
        raise UserError(f"{run_dir} is not a run directory (no metrics.jsonl) nor an experiment's "
                        "(no verdict.md)")
    print(write_report(run_dir))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("quickstart", help="tiny model: SFT cold start, GRPO, before/after table "
                                          "(--model smollm2: a real instruct model)")
    p.add_argument("--model", choices=("tiny", "smollm2"), default="tiny",
                   help="tiny: the embedded 1M-parameter model; smollm2: SmolLM2-135M-Instruct "
                        "(needs `make real-model`)")
    p.add_argument("--config", default=None,
                   help="GRPO stage config (default: the shipped quickstart preset)")
    p.add_argument("--stop-accuracy", type=float, default=0.2,
                   help="end the cold start once a held-out subset reaches this accuracy")
    p.add_argument("--no-eval", action="store_true", help="skip the test-time-compute evaluation")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. grpo.steps=50")
    p.set_defaults(func=_cmd_quickstart)

    p = sub.add_parser("train", help="GRPO training from a YAML config")
    p.add_argument("config")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. grpo.group_size=16")
    p.add_argument("--resume", choices=None, default=None, help="auto | never | PATH (run.resume)")
    p.add_argument("--strict-rewards", action="store_true",
                   help="stop at the first reward function that raises (run.strict_rewards=true)")
    p.set_defaults(func=_cmd_train)

    from rlvr.cli.sft import add_arguments as add_sft_arguments
    p = sub.add_parser("sft", help="supervised fine-tuning: traces, JSONL pairs, or teacher distillation")
    add_sft_arguments(p)
    p.set_defaults(func=_cmd_sft)

    from rlvr.cli.eval import add_arguments as add_eval_arguments
    p = sub.add_parser("eval", help="held-out accuracy, pass@k, maj@k, budget curves")
    add_eval_arguments(p)
    p.set_defaults(func=_cmd_eval)

    sub.add_parser("verify", help="score a JSONL file offline with a verifier "
                   "(rlvr verify --help for its options)", add_help=False)

    p = sub.add_parser("report", help="write RUN_DIR/report.html")
    p.add_argument("run_dir")
    p.set_defaults(func=_cmd_report)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """argparse takes one run of words for a `nargs="*"` positional; `rlvr sft` and `rlvr eval`
    take `key=value` words anywhere among their flags, so later runs join the first."""
    args, extra = parser.parse_known_args(argv)
    if extra and (not hasattr(args, "words") or any(w.startswith("-") for w in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.words = [*args.words, *extra]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["verify"]:  # `rlvr verify` owns all of its arguments
        from rlvr.verifiers.offline import main as verify_main
        return verify_main(argv[1:])
    parser = build_parser()
    args = _parse(parser, argv)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        if args.debug:
            raise
        print(f"rlvr {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted; the newest complete checkpoint is kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
