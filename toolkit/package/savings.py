"""What templates and deduplication save: the ``templates`` and ``summary`` frames of a package.

Contract: ``_templates`` compares, per repeated block, the template counted
once (steps, plan rows, argument records) with unrolling every instance
(``TEMPLATES_SCHEMA``, empty without repeats); ``_summary`` gives the one-row
``SUMMARY_SCHEMA`` totals: SRAM bytes over all tiles, the package file with
and without deduplication, and the savings of templates and deduplication.
"""

from __future__ import annotations

import polars as pl

from toolkit.package.model import SUMMARY_SCHEMA, TEMPLATES_SCHEMA, PackageModel
from toolkit.package.objects import _unique_rows, _up


def _templates(repeats, steps, rows, args, relocs, phase_block, row_bytes: int, model: PackageModel) -> pl.DataFrame:
    """Per repeated block: the template (counted once) against unrolling every instance."""
    if not repeats.height:
        return pl.DataFrame(schema=TEMPLATES_SCHEMA)
    inside = steps.filter(pl.col("instances") > 1)
    st = inside.group_by("block").agg(
        pl.col("tile").n_unique().cast(pl.Int64).alias("tiles"), pl.len().cast(pl.Int64).alias("steps"),
        pl.col("entry_bytes").sum()).join(
        inside.unique(["block", "tile", "body"]).group_by("block").agg(pl.col("code_bytes").sum()), on="block")
    st = st.select("block", "tiles", "steps", (pl.col("entry_bytes") + pl.col("code_bytes")).alias("step_bytes"))
    blocks = phase_block.filter(pl.col("instances") > 1)
    inner = rows.filter(pl.col("phase").is_in(blocks["phase"].implode())).join(blocks, on="phase")
    none = pl.DataFrame(schema={"tile": pl.Int32, "digest": pl.UInt64, "block": pl.String})
    rw = pl.concat([_unique_rows(inner.filter(pl.col("block") == b)).with_columns(pl.lit(b).alias("block"))
                    for b in blocks["block"].unique().to_list()] or [none])
    rw = rw.group_by("block").agg(pl.len().cast(pl.Int64).alias("rows"))
    ar = (args.join(phase_block, on="phase").filter(pl.col("instances") > 1).group_by("block")
          .agg(pl.len().cast(pl.Int64).alias("args"), _up(pl.col("arg_bytes"), model.data_align).sum()
               .alias("arg_bytes")))
    rl = relocs.group_by("block").agg(pl.len().cast(pl.Int64).alias("relocation_records"))
    t = (repeats.select("block", pl.col("instances").cast(pl.Int64))
         .join(st, on="block", how="left").join(rw, on="block", how="left").join(ar, on="block", how="left")
         .join(rl, on="block", how="left").with_columns(pl.exclude("block", "instances").fill_null(0)))
    t = t.with_columns(
        (pl.col("step_bytes") + pl.col("rows") * row_bytes + pl.col("arg_bytes")).alias("template_bytes"),
        (pl.col("steps") + pl.col("rows") + pl.col("args")).alias("template_records"),
        (pl.col("relocation_records") * model.relocation_record_bytes).alias("relocation_bytes"),
    ).with_columns(
        (pl.col("template_bytes") * pl.col("instances")).alias("bytes_if_unrolled"),
        (pl.col("template_records") * pl.col("instances")).alias("records_if_unrolled"),
    ).with_columns(
        (pl.col("bytes_if_unrolled") - pl.col("template_bytes") - pl.col("relocation_bytes")).alias("savings_bytes"),
        (pl.col("records_if_unrolled") - pl.col("template_records") - pl.col("relocation_records"))
        .alias("savings_records"),
    )
    return t.cast(TEMPLATES_SCHEMA).select(list(TEMPLATES_SCHEMA)).sort("block")


def _summary(per_tile, rows, templates, objects, digests, row_bytes: int, model: PackageModel) -> pl.DataFrame:
    """One row: sizes over all tiles, and what templates and deduplication save (bytes and records)."""
    s = per_tile.select(
        pl.len().cast(pl.Int64).alias("tiles"),
        pl.col("steps").sum(), pl.col("rows").sum(), pl.col("unique_rows").sum().alias("tile_unique_rows"),
        pl.col("kernel_code_bytes").sum(), pl.col("supervisor_code_bytes").sum(), pl.col("code_bytes").sum(),
        pl.col("code_elements").sum(), pl.col("rows_bytes").sum(), pl.col("run_table_bytes").sum(),
        pl.col("argument_records").sum(), pl.col("argument_bytes").sum(), pl.col("relocation_records").sum(),
        pl.col("relocation_bytes").sum(), pl.col("total_bytes").max().alias("max_tile_bytes"),
    )
    rows_total = int(s["rows"][0] or 0)
    tile_unique = int(s["tile_unique_rows"][0] or 0)
    unique_rows = rows["digest"].n_unique()
    # the package file: every distinct content once, rows once with a per-tile index, one table entry per segment
    loaded = objects.join(digests, on="object_id").filter(pl.col("loaded"))
    blobs = loaded.filter(pl.col("kind") != "exchange_rows").with_columns(
        pl.coalesce(pl.col("digest"), pl.col("object_id").cast(pl.UInt64)).alias("content"))
    distinct = blobs.unique("content")
    image_bytes = (int(distinct["size_bytes"].sum()) + unique_rows * row_bytes + tile_unique * model.row_index_bytes
                   + loaded.height * model.segment_entry_bytes)
    loaded_bytes = int(loaded["size_bytes"].sum()) + loaded.height * model.segment_entry_bytes
    n_images = per_tile["image_digest"].n_unique() if per_tile.height else 0
    extra = {
        "unique_images": n_images,
        "unique_rows": unique_rows,
        "unique_contents": distinct.height,
        "support_bytes": int(objects.filter(pl.col("kind") == "support")["size_bytes"].sum()),
        "total_bytes": int(objects["size_bytes"].sum()),
        "loaded_bytes": loaded_bytes,
        "image_bytes": image_bytes,
        "template_savings_bytes": int(templates["savings_bytes"].sum()) if templates.height else 0,
        "template_savings_records": int(templates["savings_records"].sum()) if templates.height else 0,
        "row_dedup_savings_bytes": (rows_total - tile_unique) * row_bytes,
        "row_dedup_savings_records": rows_total - tile_unique,
        "dedup_savings_bytes": loaded_bytes - image_bytes,
        "dedup_savings_records": (blobs.height - distinct.height) + (tile_unique - unique_rows),
        "dedup_savings_images": per_tile.height - n_images,
    }
    s = s.with_columns(pl.exclude("tiles").fill_null(0), **{k: pl.lit(v, pl.Int64) for k, v in extra.items()})
    return s.cast(SUMMARY_SCHEMA).select(list(SUMMARY_SCHEMA))
