"""Exchange lowering: groups, packets, staging passes, step assignment and plan rows.

``lower_exchanges(transfers, target)`` is the stage; ``assign_steps`` and
``step_lower_bound`` work on their own on any ``group, source, destination``
frame; ``verify_exchange`` checks a lowering independently of the code that made it.
"""

from toolkit.exchange.lower import (
    ROWS_SCHEMA,
    STEPPED_GROUPS_SCHEMA,
    SUMMARY_SCHEMA,
    Exchange,
    lower_exchanges,
)
from toolkit.exchange.packets import GROUPS_SCHEMA, PACKETS_SCHEMA, PASSES_SCHEMA, packetize, stage_passes
from toolkit.exchange.steps import assign_steps, step_lower_bound
from toolkit.exchange.verify import verify_exchange

__all__ = [
    "GROUPS_SCHEMA",
    "PACKETS_SCHEMA",
    "PASSES_SCHEMA",
    "ROWS_SCHEMA",
    "STEPPED_GROUPS_SCHEMA",
    "SUMMARY_SCHEMA",
    "Exchange",
    "assign_steps",
    "lower_exchanges",
    "packetize",
    "stage_passes",
    "step_lower_bound",
    "verify_exchange",
]
