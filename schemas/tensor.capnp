@0xc8fd6b99ebde0d61;
# Tensors on the wire and in files. Numeric data is raw little-endian bytes, so a
# receiver can read it in place (zero-copy) when the message buffer is aligned.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("actorflow::wire");

enum DType {
  f32 @0;
  f64 @1;
  i32 @2;
  i64 @3;
  u8 @4;
  boolean @5;
  string @6;
}

struct TensorShape {
  unknownRank @0 :Bool;
  dims @1 :List(Int64);    # -1 = unknown (graph time only)
}

struct TensorProto {
  dtype @0 :DType;
  shape @1 :TensorShape;
  data @2 :Data;            # numeric and bool dtypes
  strings @3 :List(Text);   # string dtype
  # Not 0: the data (this many bytes) travels beside the message rather than in `data`
  # (a daemon frame's payload, net/src/frame.h), so it is written from and read into the
  # tensor's own buffer. Never set in files.
  besideBytes @4 :UInt64;
}

struct StatusProto {
  code @0 :Int32;           # 0 = OK
  message @1 :Text;
}

# One tensor travelling along one graph edge for one step: the message a node actor
# sends to a consumer, local or remote.
struct TensorMsg {
  stepId @0 :Int64;
  edge @1 :UInt32;          # the consumer's input slot (or a partition's edge id)
  producer @2 :Text;        # "node:output", for error messages
  tensor @3 :TensorProto;
  status @4 :StatusProto;   # not OK: the step failed upstream; tensor is empty
}
