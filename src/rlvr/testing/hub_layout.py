"""Folders in the layout the Hugging Face hub ships datasets in, for tests and benches: one
parquet file per config and split (`CONFIG/SPLIT-00000-of-00001.parquet`) and a `README.md` card
whose `configs:` front matter names them, as `openai/gsm8k` has. `datasets.load_dataset(folder,
name=CONFIG, split=SPLIT)` reads such a folder offline, as rlvr's `data.train_path` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def write_hub_layout(folder: Path, splits: dict[str, Sequence[dict[str, Any]]], config: str = "main",
                     row_group_size: int | None = None) -> Path:
    """`folder` with `config`'s splits ({split: rows}) as parquet, and the card naming them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / config).mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        pq.write_table(pa.Table.from_pylist(list(rows)), folder / config / f"{split}-00000-of-00001.parquet",
                       row_group_size=row_group_size)
    files = "".join(f"  - split: {s}\n    path: {config}/{s}-*\n" for s in splits)
    (folder / "README.md").write_text(f"---\nconfigs:\n- config_name: {config}\n  data_files:\n{files}---\n"
                                      f"# {folder.name}, in the hub's layout\n")
    return folder
