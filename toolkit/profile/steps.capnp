# Step types of the `ipu-stack` cycle profile (schema version 5 moved them into this file).
# Ordinals must match ../shared/formats/profile.md exactly: they fix the binary layout.
@0xf3c4b874bcfe20c9;

enum StepKind {
  exchange @0;
  compute @1;
  synchronization @2;  # since schema version 3
  idle @3;             # since schema version 3
}

struct Metadata {
  name @0 :Text;
  value @1 :Text;
}

enum ExchangeActivityKind {
  send @0;
  receive @1;
  partnerBusy @2;      # since schema version 5
}

struct ExchangeActivity {
  kind @0 :ExchangeActivityKind;
  startCycle @1 :UInt32;   # offset within the exchange phase
  endCycle @2 :UInt32;     # offset within the exchange phase
  fanout @3 :UInt16;       # destination tiles, 0 = unknown (later version-5 writers)
  paired @4 :Bool;         # 64-bit paired transfer borrowing the lane of tile XOR 2 (later version-5 writers)
}

struct Step {
  localIndex @0 :UInt32;
  phase @1 :UInt32;
  epoch @2 :UInt32;
  operation @3 :Text;
  kind @4 :StepKind;
  kernel @5 :Text;
  metadata @6 :List(Metadata);                   # since schema version 2
  exchangeActivities @7 :List(ExchangeActivity); # since schema version 4
  exchangeEventCycles @8 :UInt32;                # since schema version 4
}
