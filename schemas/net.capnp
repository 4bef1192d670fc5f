@0xbcbb2ec29d5f0b4e;
# The node daemon's wire: every frame body is one Frame message (flat array), behind the
# 16-byte header of net/src/frame.h. Tensors travel as TensorMsg structs (tensor.capnp)
# inside the frame's message, in tensor_codec's split form (large numeric data beside the
# body, in the frame's payload): one message and one reader per frame. (Protocol version 1
# nested each TensorMsg as a message of its own in Data bytes; version 2 is this.)
using Cxx = import "/capnp/c++.capnp";
using T = import "tensor.capnp";
$Cxx.namespace("actorflow::wire");

# Both sides open with a Hello. The nonce (32 random bytes) makes every handshake's MACs
# fresh, so a recorded handshake cannot be replayed.
struct Hello {
  protoVersion @0 :UInt32;
  role @1 :Text;             # "client" or "daemon"
  task @2 :Text;             # "/job:worker/task:0", or a client's label
  incarnation @3 :UInt64;    # random per process start
  nonce @4 :Data;
}

# HMAC-SHA256 over both Hellos with the cluster token (net/src/handshake.h).
struct AuthProof {
  mac @0 :Data;
}

# The daemon accepted the client; frames may now be as large as maxMessageBytes.
struct Welcome {
  maxMessageBytes @0 :UInt64;
}

struct RegisterGraph {
  requestId @0 :UInt64;
  graphDef @1 :Data;         # Graph::serialize() bytes of one partition
  # Unused since protocol 5: before it a graph without a location ran whole, and this
  # named the graph it extended. Now every graph registered is a partition.
  obsoleteExtendsHandle @2 :UInt64;
  # One partition of a graph cut over the daemons of a session (graph_partition.h; a
  # session on one daemon is one partition): where it runs ("/job:worker/task:1/cpu:0";
  # required), the client's session id that keys its edges, the daemon address of every
  # location of that session, and the credits per edge.
  location @3 :Text;
  session @4 :UInt64;
  peers @5 :List(PeerAddress);
  edgeCapacity @6 :Int32;
  # Partitions registered with one scope (a client session's) share the variables of
  # their location, whatever kind of step each was cut for.
  variableScope @7 :UInt64;
  # Not empty: the partitions share the variables of this named container at their
  # location instead (SessionOptions::shared_container), whatever session registered
  # them; keyed by the whole name, so no two names can meet.
  container @8 :Text;
}

struct PeerAddress {
  location @0 :Text;
  address @1 :Text;          # "host:port" of the daemon running that location
}

# One tensor crossing a cut edge, pushed by the producer's daemon while it holds a credit
# of the edge; daemons send these to each other, never to clients.
struct Edge {
  session @0 :UInt64;
  stepId @1 :UInt64;
  edge @2 :UInt64;
  toLocation @3 :Text;
  tensor @4 :T.TensorMsg;
}

# One credit of `edge` back to its producer at `toLocation`: the consumer took a tensor.
struct Credit {
  session @0 :UInt64;
  edge @1 :UInt64;
  toLocation @2 :Text;
}

struct StepStatus {
  code @0 :Int32;            # actorflow::Code; 0 = OK
  message @1 :Text;
}

struct Registered {
  requestId @0 :UInt64;
  handle @1 :UInt64;         # 0 when status is not OK
  status @2 :StepStatus;
}

struct NamedTensor {
  name @0 :Text;             # "node:index"
  tensor @1 :T.TensorMsg;
}

struct RunStep {
  handle @0 :UInt64;
  stepId @1 :UInt64;
  feeds @2 :List(NamedTensor);
  fetches @3 :List(Text);    # "node:index"
  targets @4 :List(Text);    # node names
  timeoutMs @5 :Int64;       # 0: none
}

struct StepDone {
  stepId @0 :UInt64;
  status @1 :StepStatus;
  fetched @2 :List(T.TensorMsg);  # in the order of RunStep.fetches
}

struct CloseGraph {
  handle @0 :UInt64;
}

struct Heartbeat {
  sentAtMs @0 :Int64;
}

# The client's word that step `stepId` of partition `handle` failed elsewhere: the
# daemon aborts it there, so partitions waiting for edges that will never come end now
# rather than at their deadline.
struct CleanupStep {
  handle @0 :UInt64;
  stepId @1 :UInt64;
  status @2 :StepStatus;
}

# A client's word that training is over: the daemon drains its steps, closes its
# connections and stops (a ps process then exits 0). Any authenticated client may send it.
struct Shutdown {
  reason @0 :Text;
}

# The rendezvous store of a collective group (Gloo's rendezvous::Store), served by the
# chief's daemon to the group's members over their authenticated connections: set a key,
# or get it (not_found while absent; the member polls until its deadline), or erase every
# key that starts with a prefix (a generation's keys once a newer one is published). Keys
# live in the namespace the member names (its job), bounded in size and count by the daemon.
struct StoreRequest {
  requestId @0 :UInt64;
  set @1 :Bool;              # false: get (or erase)
  space @2 :Text;            # the namespace (a job's name)
  key @3 :Text;              # with erasePrefix: the prefix
  value @4 :Data;            # set only
  erasePrefix @5 :Bool;      # with set false: erase every key of the space starting with key
}

struct StoreReply {
  requestId @0 :UInt64;
  status @1 :StepStatus;
  value @2 :Data;            # get only
}

struct Frame {
  union {
    hello @0 :Hello;
    authProof @1 :AuthProof;
    welcome @2 :Welcome;
    registerGraph @3 :RegisterGraph;
    registered @4 :Registered;
    runStep @5 :RunStep;
    stepDone @6 :StepDone;
    closeGraph @7 :CloseGraph;
    heartbeat @8 :Heartbeat;
    edge @9 :Edge;
    credit @10 :Credit;
    cleanupStep @11 :CleanupStep;
    shutdown @12 :Shutdown;
    storeRequest @13 :StoreRequest;
    storeReply @14 :StoreReply;
  }
}
