// The slow-peer rule (model/peer_links.h) on the per-step figures two real jobs gave: four PyTorch
// ranks on an H100 over sockets, 4 MiB ring all-reduces, fair and with rank 2's proxy starved.
#include "model/peer_links.h"

#include <catch2/catch.hpp>

namespace {

using ncclwatch::model::PeerLink;
using ncclwatch::model::PeerLinks;
using ncclwatch::model::slow_peers;

// A link of 1560 steps (65 calls) at these per-step figures, in us.
void link(PeerLinks& links, int rank, int remote, bool send, double step_us, double peer_wait_us) {
  PeerLink& l = links[{0xabc, rank, remote, send}];
  l.nranks = 4;
  l.operations = 130;
  l.steps = 1560;
  l.step_ns = uint64_t(step_us * 1e3 * 1560);
  l.peer_wait_ns = uint64_t(peer_wait_us * 1e3 * 1560);
}

// rank, send peer wait, send step, recv peer wait, recv step (us), as `peers` printed them.
struct Figures {
  double send_step, send_wait, recv_step, recv_wait;
};

PeerLinks ring(const Figures (&f)[4]) {
  PeerLinks links;
  for (int r = 0; r < 4; ++r) {
    link(links, r, (r + 1) % 4, true, f[r].send_step, f[r].send_wait);
    link(links, r, (r + 3) % 4, false, f[r].recv_step, f[r].recv_wait);
  }
  return links;
}

}  // namespace

TEST_CASE("the starved proxy's rank is named, and nobody in the fair job") {
  const Figures fair[4] = {{628.3, 149.5, 670.2, 437.8}, {630.1, 97.5, 678.6, 522.5},
                           {619.8, 144.2, 661.1, 432.9}, {632.6, 91.0, 678.5, 528.0}};
  CHECK(slow_peers(ring(fair)).empty());
  const Figures starved[4] = {{17929.0, 58.7, 18614.0, 18547.8}, {17902.0, 73.1, 17925.8, 17838.9},
                              {17015.3, 6287.0, 15814.3, 4737.3}, {18579.5, 85.8, 18938.7, 18831.7}};
  auto named = slow_peers(ring(starved));
  REQUIRE(named.size() == 1);
  CHECK(named[0].rank == 2);
  CHECK(named[0].others_us == Approx(18547.8).epsilon(0.001));
  CHECK(named[0].waiting == std::vector<int32_t>{0, 1, 3});
}

TEST_CASE("an idle rank that waits on nobody is not named, nor are two ranks") {
  // Rank 2's steps are short: it had little to do, it held nobody up.
  const Figures idle[4] = {{600, 100, 700, 500}, {600, 100, 700, 500}, {50, 1, 60, 2}, {600, 100, 700, 500}};
  CHECK(slow_peers(ring(idle)).empty());
  PeerLinks two;
  link(two, 0, 1, false, 18000, 17000);
  link(two, 1, 0, false, 16000, 100);
  CHECK(slow_peers(two).empty());
}

TEST_CASE("a link's sends move at their bytes over the time they moved, channels and operations counted once") {
  using ncclwatch::trace::OpProxyRecord;
  PeerLinks links;
  ncclwatch::model::ImplausibleValues implausible;
  // start and stop in us; the data moved from `moving_us` on.
  auto send = [&](int64_t start_us, int64_t moving_us, int64_t stop_us, uint64_t bytes, bool moving = true) {
    OpProxyRecord p{};
    p.h.type = static_cast<uint16_t>(ncclwatch::trace::RecordType::kOpProxy);
    p.comm_id = 0xabc;
    p.rank = 0;
    p.nranks = 4;
    p.remote = 1;
    p.start_ns = start_us * 1000;
    p.stop_ns = stop_us * 1000;
    p.moving_after_us = uint32_t(moving_us - start_us);
    p.bytes = bytes;
    p.flags = ncclwatch::trace::kProxySend | (moving ? ncclwatch::trace::kProxyMoving : 0);
    ncclwatch::model::RecordView r{ncclwatch::trace::RecordType::kOpProxy, reinterpret_cast<const std::byte*>(&p),
                                   sizeof(p), 0};
    add_proxy_operation(links, p, r, implausible);
  };
  send(0, 1000, 1400, 400'000);     // channel 0 of op 1: 400 us moving
  send(0, 1100, 1500, 400'000);     // channel 1, overlapping: the link moved 1000-1500
  send(100, 3000, 3500, 500'000);   // op 2, later: 500 us more
  send(200, 4000, 4500, 9'000'000, false);  // no moving time known: left out of the rate
  close_moving_stretches(links);
  const PeerLink& l = links.at({0xabc, 0, 1, true});
  CHECK(l.moving_ns == 1'000'000);
  CHECK(l.moving_bytes == 1'300'000);
  CHECK(l.send_gbps() == Approx(1.3));
  CHECK(l.bytes == 10'300'000);
  // Merged into the job's links, a thread's closed stretches keep their time.
  PeerLinks job;
  job[{0xabc, 0, 1, true}].merge(l);
  CHECK(job.at({0xabc, 0, 1, true}).moving_ns == 1'000'000);
}
