"""Files the toolkit reads and writes: confined, bounded reads (:mod:`.read`), atomic writes and output checks
(:mod:`.write`), and directory replacement that never leaves a moment without a complete case (:mod:`.replace`)."""

from toolkit.files.names import check_name_lengths
from toolkit.files.read import (
    MAX_DEPTH,
    TEXT_LIMIT,
    check_tables,
    decode_text,
    depth_ok,
    gunzip,
    inside,
    load_json,
    load_toml,
    open_regular,
    read_bytes,
    read_table,
    read_text,
    table_limit,
)
from toolkit.files.write import atomic_write, check_not_input, check_output, check_parent, write_table

__all__ = [
    "MAX_DEPTH",
    "TEXT_LIMIT",
    "atomic_write",
    "check_name_lengths",
    "check_not_input",
    "check_output",
    "check_parent",
    "check_tables",
    "decode_text",
    "depth_ok",
    "gunzip",
    "inside",
    "load_json",
    "load_toml",
    "open_regular",
    "read_bytes",
    "read_table",
    "read_text",
    "table_limit",
    "write_table",
]
