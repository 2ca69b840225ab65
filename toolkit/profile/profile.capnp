# Cycle profile of the `ipu-stack` runtime: one message per profile, standard unpacked framing.
# Ordinals must match ../shared/formats/profile.md exactly: they fix the binary layout.
@0xbadb9c24f7721fa3;

using Steps = import "steps.capnp";

struct Profile {
  schemaVersion @0 :UInt32;       # 1..5
  clockHz @1 :UInt64;             # 0 means the default 1.5e9
  tiles @2 :List(TileProfile);
}

struct TileProfile {
  physicalTile @0 :UInt32;
  samples @1 :List(CycleSample);
}

struct CycleSample {
  step @0 :Steps.Step;
  startCycle @1 :UInt32;
  endCycle @2 :UInt32;
}
