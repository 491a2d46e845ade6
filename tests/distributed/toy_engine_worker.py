"""`rlvr train` with an engine registered from outside the package. Usage (under torchrun or not):
toy_engine_worker.py CONFIG [key=value ...]; the engine is `toy_engine.ToyEngine`, registered as
`rollout.engine: toy`, sharded across ranks (`ranks="shard"`)."""

import sys

import toy_engine

import rlvr
from rlvr.cli.main import main

rlvr.register_engine("toy", toy_engine.build, ranks="shard")

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
