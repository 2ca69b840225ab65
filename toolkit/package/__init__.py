"""Stage ``package``: tile images sized before placement, then placed segments, their checker and writers.

``size_package(schedule, exchange, tiles, target)`` sizes every tile's code,
plan rows, run table, host state, argument records and support segments as
memory objects (see :mod:`toolkit.package.size` for the size model, the
templates of repeated blocks and deduplication); after placement,
``package_images`` lists every placed segment and ``verify_package`` checks
them; ``write_placement_dump`` / ``write_images_parquet`` write them.
"""

from toolkit.package.dump import (
    ALLOCATIONS_SCHEMA,
    dump_allocations,
    read_placement_dump,
    write_images_parquet,
    write_placement_dump,
)
from toolkit.package.images import IMAGES_SCHEMA, package_images, verify_package
from toolkit.package.model import (
    ARGUMENTS_SCHEMA,
    DEFAULT_KERNEL_CODE_BYTES,
    DIGESTS_SCHEMA,
    RELOCATIONS_SCHEMA,
    SUMMARY_SCHEMA,
    TEMPLATES_SCHEMA,
    TILES_SCHEMA,
    Package,
    PackageModel,
)
from toolkit.package.size import size_package

__all__ = [
    "ALLOCATIONS_SCHEMA", "ARGUMENTS_SCHEMA", "DEFAULT_KERNEL_CODE_BYTES", "DIGESTS_SCHEMA", "IMAGES_SCHEMA",
    "RELOCATIONS_SCHEMA", "SUMMARY_SCHEMA", "TEMPLATES_SCHEMA", "TILES_SCHEMA", "Package", "PackageModel",
    "dump_allocations", "package_images", "read_placement_dump", "size_package", "verify_package",
    "write_images_parquet", "write_placement_dump",
]
