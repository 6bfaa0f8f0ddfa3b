#include "reports/export_peers.h"

#include "reports/export_columns.h"

namespace ncclwatch::report {

using parquet::Kind;

const std::vector<parquet::ColumnSpec> kPeersSchema = with_process({
    {"comm_id", Kind::kString}, {"rank", Kind::kInt32}, {"nranks", Kind::kInt32}, {"peer", Kind::kInt32},
    {"direction", Kind::kString}, {"transport", Kind::kString}, {"operations", Kind::kInt64, true},
    {"steps", Kind::kInt64, true}, {"bytes", Kind::kInt64, true}, {"step_ns", Kind::kInt64, true},
    {"gpu_wait_ns", Kind::kInt64, true}, {"peer_wait_ns", Kind::kInt64, true}, {"moving_bytes", Kind::kInt64, true},
    {"moving_ns", Kind::kInt64, true}, {"send_gbps", Kind::kDouble, true}, {"partial_operations", Kind::kInt64, true},
});

void TracePeers::write(parquet::TableWriter& w, std::string_view trace, int32_t pid) const {
  for (const auto& [key, link] : links_) {
    w[0].add(trace);
    w[1].add(int64_t{pid});
    std::string id = model::hex_id(key.comm_id);
    w[2].add(std::string_view(id));
    w[3].add(int64_t{key.rank});
    w[4].add(int64_t{link.nranks});
    w[5].add(int64_t{key.remote});
    w[6].add(std::string_view(key.send ? "send" : "recv"));
    w[7].add(std::string_view("network"));  // NCCL reports proxy steps for its network transport alone
    add_unsigned(w[8], link.operations);
    add_unsigned(w[9], link.steps);
    add_unsigned(w[10], link.bytes);
    add_unsigned(w[11], link.step_ns);
    add_unsigned(w[12], link.gpu_wait_ns);
    add_unsigned(w[13], link.peer_wait_ns);
    add_unsigned(w[14], link.moving_bytes, key.send);
    add_unsigned(w[15], link.moving_ns, key.send);
    w[16].add_optional(key.send && link.moving_ns > 0, link.send_gbps());
    add_unsigned(w[17], link.partial);
    w.end_row();
  }
}

}  // namespace ncclwatch::report
