@0x846dd019199c4c14;
# GraphDef: a whole graph with constant values, attributes and collections.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("actorflow::wire");
using Tensor = import "tensor.capnp";

struct AttrValue {
  union {
    none @0 :Void;
    i @1 :Int64;
    f @2 :Float64;
    b @3 :Bool;
    s @4 :Text;
    type @5 :Tensor.DType;
    shape @6 :Tensor.TensorShape;
    ints @7 :List(Int64);
    floats @8 :List(Float64);
    strings @9 :List(Text);
    tensor @10 :Tensor.TensorProto;
  }
}

struct Attr {
  key @0 :Text;
  value @1 :AttrValue;
}

struct NodeInput {
  node @0 :Text;            # producer's name
  index @1 :UInt32;         # producer's output
}

struct NodeDef {
  name @0 :Text;
  op @1 :Text;
  device @2 :Text;
  inputs @3 :List(NodeInput);
  controlInputs @4 :List(Text);
  attrs @5 :List(Attr);
}

struct Collection {
  key @0 :Text;
  nodes @1 :List(Text);
}

struct GraphDef {
  version @0 :UInt32;       # format version, currently 1
  nodes @1 :List(NodeDef);
  collections @2 :List(Collection);
  seed @3 :Int64;
}
