-- How bus bandwidth per op and size moves between NCCL versions, across every job exported: the
-- median over jobs of each job's median steady-state GPU time (see busbw_per_size.sql).
WITH calls AS (
  SELECT o.job, o.host, o.trace, o.comm_id, o.op, o.bytes, o.nranks, o.gpu_begin_ns, o.gpu_end_ns,
         o.launch_ops, o.replayed, o.timing,
         row_number() OVER (PARTITION BY o.job, o.host, o.trace, o.comm_id, o.op, o.bytes
                            ORDER BY o.host_begin_ns, o.seq) AS call
  FROM ops o
  WHERE NOT o.captured
),
per_job AS (
  SELECT c.job, p.nccl_version, c.op, c.bytes, c.nranks, percentile_disc(0.5) WITHIN GROUP (ORDER BY (c.gpu_end_ns - c.gpu_begin_ns) / 1e3) AS p50_us
  FROM calls c JOIN processes p ON c.job = p.job AND c.host = p.host AND c.trace = p.trace
  WHERE c.call > 1 AND c.timing = 'gpu' AND c.launch_ops = 1 AND NOT c.replayed
  GROUP BY c.job, p.nccl_version, c.op, c.bytes, c.nranks
)
SELECT nccl_version, op, bytes, nranks, count(*) AS jobs, percentile_disc(0.5) WITHIN GROUP (ORDER BY p50_us) AS p50_us,
       bytes / percentile_disc(0.5) WITHIN GROUP (ORDER BY p50_us) / 1e3 *
         CASE WHEN op = 'ncclAllReduce' THEN 2.0 * (nranks - 1) / nranks
              WHEN op IN ('ncclAllGather', 'ncclReduceScatter', 'ncclAlltoAll') THEN 1.0 * (nranks - 1) / nranks
              ELSE 1.0 END AS busbw_gbps
FROM per_job
GROUP BY nccl_version, op, bytes, nranks
ORDER BY op, bytes, nccl_version
