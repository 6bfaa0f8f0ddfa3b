// How queued operations run on the stream workers, and ncclGroupStart/End.
//
// A collective is an exchange: every rank publishes the part of its send
// buffer the operation reads, waits until all ranks of the same sequence
// number have published, and computes its own output from those copies.
// Reading copies (not the user's buffers) makes in-place use safe. A Send
// only publishes, so it never waits for its Recv.
#include "hostcuda.h"
#include "hostnccl_ops.h"
#include "hostnccl_profiler.h"
#include "hostnccl_reduce.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace hostnccl {

namespace {

// ----------------------------------------------------------------- queueing

void count_enqueued(const Op& op) {
  if (op.kind == Kind::Group) {
    for (const auto& m : op.members) count_enqueued(m);
  } else {
    op.comm->work_enqueued();
  }
}

void count_finished(const Op& op) {
  if (op.kind == Kind::Group) {
    for (const auto& m : op.members) count_finished(m);
  } else {
    op.comm->work_finished();
  }
}

// Sequence numbers are taken in the order ops reach their streams, on the
// host thread: that is the order NCCL matches them in.
void assign_seq(Op& op) {
  if (op.kind == Kind::Group) {
    for (auto& m : op.members) assign_seq(m);
    return;
  }
  CommState& c = *op.comm;
  switch (op.kind) {
    case Kind::Send: op.seq = ++c.send_seq[size_t(op.root)]; break;
    case Kind::Recv: op.seq = ++c.recv_seq[size_t(op.root)]; break;
    default: op.seq = ++c.coll_seq; break;
  }
}

void* instantiate_op(const void* tmpl) {
  auto* op = new Op(*static_cast<const Op*>(tmpl));
  assign_seq(*op);
  count_enqueued(*op);
  return op;
}

void run_op(void* p) {
  Op& op = *static_cast<Op*>(p);
  execute(op);
  count_finished(op);
}

void release_op(void* p) { delete static_cast<Op*>(p); }

const hostcuda_work_ops kOpWork = {run_op, instantiate_op, release_op};

void enqueue(CUstream stream, Op op) { hostcuda_enqueue_work(stream, &kOpWork, new Op(std::move(op))); }

struct GroupState {
  int depth = 0;
  std::vector<std::pair<CUstream, Op>> held;
  std::vector<std::shared_ptr<CommState>> inits;
};

thread_local GroupState t_group;

// ---------------------------------------------------------------- execution

bool wait_ready(CommState& c) {
  if (wait_until(c.aborted, [&] { return c.status.load() != ncclInProgress; }) != Wait::Done) return false;
  return c.status.load() == ncclSuccess && !c.aborted.load();
}

void stalled(CommState& c, const char* what) {
  c.status.store(ncclSystemError);
  set_last_error("%s: peers did not arrive within HOSTNCCL_STALL_TIMEOUT_SEC; operation abandoned", what);
}

std::string seg_base(const CommState& c, const char* what, uint64_t seq) {
  return shm_prefix(c.tag) + what + std::to_string(seq);
}

unsigned char* at(void* p, size_t offset) { return static_cast<unsigned char*>(p) + offset; }

// Elements the rank publishes for a collective.
size_t published_elems(const Op& op, int nranks, int me) {
  size_t n = size_t(nranks), c = op.count;
  switch (op.kind) {
    case Kind::Broadcast: return me == op.root ? c : 0;
    case Kind::Scatter: return me == op.root ? n * c : 0;
    case Kind::ReduceScatter:
    case Kind::AlltoAll: return n * c;
    default: return c;
  }
}

bool is_reduction(Kind k) { return k == Kind::AllReduce || k == Kind::Reduce || k == Kind::ReduceScatter; }

// Copies up to `count` elements from `block` of a peer's payload, which
// holds `avail` elements from the start of that block.
void copy_block(void* dst, const Segment& s, size_t first_elem, size_t count, size_t es) {
  size_t avail = s.header().bytes / es;
  if (first_elem >= avail) return;
  size_t n = std::min(count, avail - first_elem);
  memmove(dst, s.payload() + first_elem * es, n * es);
}

void execute_collective(Op& op) {
  CommState& c = *op.comm;
  const int n = c.nranks, me = c.rank;
  const size_t es = type_size(op.type);
  const size_t cnt = op.count;

  std::string base = seg_base(c, "c", op.seq);
  size_t elems = published_elems(op, n, me);
  Segment mine = Segment::create(base + "-" + std::to_string(me), elems * es, uint32_t(n - 1));
  SegHeader& h = mine.header();
  h.rank = me;
  h.aux[0] = int64_t(cnt);
  h.aux[1] = op.type;
  h.aux[2] = int64_t(op.kind);
  if (elems) memcpy(mine.payload(), op.send, elems * es);
  if (op.red.premul && is_reduction(op.kind)) {
    const void* scalar = op.red.scalar.residence == ncclScalarDevice ? op.red.scalar.ptr : op.red.scalar.value;
    scale(op.type, mine.payload(), elems, scalar);
  }

  std::vector<Segment> segs;
  Wait w = exchange(base, me, n, std::move(mine), segs, c.aborted);
  if (w == Wait::Stalled) stalled(c, "collective");
  if (w != Wait::Done) return;

  auto elems_of = [&](int r) { return segs[size_t(r)].header().bytes / es; };
  std::vector<Contribution> srcs;
  switch (op.kind) {
    case Kind::AllReduce:
    case Kind::Reduce:
      if (op.kind == Kind::Reduce && me != op.root) break;
      for (int r = 0; r < n; ++r) srcs.push_back({segs[size_t(r)].payload(), elems_of(r)});
      reduce(op.type, op.red.base, op.recv, cnt, srcs);
      break;
    case Kind::ReduceScatter:
      for (int r = 0; r < n; ++r) {
        size_t first = size_t(me) * cnt, have = elems_of(r);
        srcs.push_back({segs[size_t(r)].payload() + first * es, have > first ? have - first : 0});
      }
      reduce(op.type, op.red.base, op.recv, cnt, srcs);
      break;
    case Kind::Broadcast: copy_block(op.recv, segs[size_t(op.root)], 0, cnt, es); break;
    case Kind::Scatter: copy_block(op.recv, segs[size_t(op.root)], size_t(me) * cnt, cnt, es); break;
    case Kind::AllGather:
    case Kind::Gather:
      if (op.kind == Kind::Gather && me != op.root) break;
      for (int r = 0; r < n; ++r) copy_block(at(op.recv, size_t(r) * cnt * es), segs[size_t(r)], 0, cnt, es);
      break;
    case Kind::AlltoAll:
      for (int r = 0; r < n; ++r)
        copy_block(at(op.recv, size_t(r) * cnt * es), segs[size_t(r)], size_t(me) * cnt, cnt, es);
      break;
    default: break;
  }
}

std::string p2p_name(const CommState& c, int from, int to, uint64_t seq) {
  return shm_prefix(c.tag) + "p" + std::to_string(from) + "to" + std::to_string(to) + "-" + std::to_string(seq);
}

void execute_send(Op& op) {
  CommState& c = *op.comm;
  size_t bytes = op.count * type_size(op.type);
  Segment s = Segment::create(p2p_name(c, c.rank, op.root, op.seq), bytes, 1);
  s.header().rank = c.rank;
  if (bytes) memcpy(s.payload(), op.send, bytes);
  s.publish();
}

void execute_recv(Op& op) {
  CommState& c = *op.comm;
  std::string name = p2p_name(c, op.root, c.rank, op.seq);
  Segment s;
  Wait w = wait_until(c.aborted, [&] {
    s = Segment::open_published(name);
    return bool(s);
  });
  if (w == Wait::Stalled) stalled(c, "recv");
  if (w != Wait::Done) return;
  copy_block(op.recv, s, 0, op.count, type_size(op.type));
}

// HOSTNCCL_LOCAL_OPS=N: the first N collectives of every communicator complete at once, without
// exchanging data with the peers (a soak test's bulk: what is under test is the recording of
// millions of calls, not the stand-in's shared-memory exchange, at ~100 us each).
uint64_t local_ops() {
  static const uint64_t n = [] {
    const char* env = std::getenv("HOSTNCCL_LOCAL_OPS");
    return env ? std::strtoull(env, nullptr, 10) : 0;
  }();
  return n;
}

}  // namespace

void execute(Op& op) {
  if (op.kind == Kind::Group) {
    // Sends first: they never block, so matching recvs issued in any order
    // inside a group cannot deadlock.
    for (auto& m : op.members)
      if (m.kind == Kind::Send) execute(m);
    for (auto& m : op.members)
      if (m.kind != Kind::Send) execute(m);
    return;
  }
  if (!wait_ready(*op.comm)) return;
  profiler_kernel_begin(op);
  switch (op.kind) {
    case Kind::Send: execute_send(op); break;
    case Kind::Recv: execute_recv(op); break;
    default:
      if (op.seq > local_ops()) execute_collective(op);
      break;
  }
  profiler_kernel_end();
}

ncclResult_t submit(Op op, CUstream stream) {
  if (t_group.depth > 0) {
    t_group.held.emplace_back(stream, std::move(op));
    return ncclSuccess;
  }
  op.comm->set_up_for(static_cast<int>(op.kind));
  profiler_op_planned(op);
  enqueue(stream, std::move(op));
  return ncclSuccess;
}

bool in_group() { return t_group.depth > 0; }

void group_defer_init(std::shared_ptr<CommState> s) { t_group.inits.push_back(std::move(s)); }

ncclResult_t group_start() {
  ++t_group.depth;
  return ncclSuccess;
}

ncclResult_t group_end(bool simulate) {
  if (t_group.depth == 0) {
    set_last_error("GroupEnd without GroupStart");
    return ncclInvalidUsage;
  }
  if (--t_group.depth > 0) return ncclSuccess;
  std::vector<std::shared_ptr<CommState>> inits;
  std::vector<std::pair<CUstream, Op>> held;
  inits.swap(t_group.inits);
  held.swap(t_group.held);

  ncclResult_t result = ncclSuccess;
  for (const auto& s : inits) {
    if (!s->blocking) {
      if (s->status.load() == ncclInProgress) result = ncclInProgress;
      continue;
    }
    std::unique_lock<std::mutex> l(s->mu);
    s->cv.wait(l, [&] { return s->status.load() != ncclInProgress; });
    if (s->status.load() != ncclSuccess && result == ncclSuccess) result = s->status.load();
  }
  if (simulate) return result;

  // One item per stream, in the order streams first appear, so ops of one
  // stream stay in issue order.
  std::vector<std::pair<CUstream, Op>> bundles;
  for (auto& [held_stream, op] : held) {
    op.comm->set_up_for(static_cast<int>(op.kind));
    profiler_op_planned(op);
    CUstream stream = held_stream;  // C++20 lambdas cannot capture a structured binding (clang 14)
    auto it = std::find_if(bundles.begin(), bundles.end(), [&](const auto& b) { return b.first == stream; });
    if (it == bundles.end()) {
      Op g;
      g.kind = Kind::Group;
      bundles.emplace_back(stream, std::move(g));
      it = bundles.end() - 1;
    }
    it->second.members.push_back(std::move(op));
  }
  for (auto& [stream, g] : bundles) {
    if (g.members.size() == 1) {
      enqueue(stream, std::move(g.members.front()));
    } else {
      enqueue(stream, std::move(g));
    }
  }
  return result;
}

}  // namespace hostnccl
