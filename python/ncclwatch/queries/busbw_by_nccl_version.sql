-- How bus bandwidth per op and size moves between NCCL versions, across every job exported: the
-- median over jobs of each job's median steady-state GPU time (see busbw_per_size.sql).
WITH firsts AS (
  SELECT job, host, trace, comm_id, rank, op, bytes, min(host_begin_ns) AS first_ns
  FROM ops
  WHERE NOT captured
  GROUP BY job, host, trace, comm_id, rank, op, bytes
),
per_job AS (
  SELECT o.job, p.nccl_version, o.op, o.bytes, o.nranks,
         percentile_disc(0.5) WITHIN GROUP (ORDER BY (o.gpu_end_ns - o.gpu_begin_ns) / 1e3) AS p50_us
  FROM ops o
  JOIN firsts f ON o.job = f.job AND o.host = f.host AND o.trace = f.trace AND o.comm_id = f.comm_id
                   AND o.rank = f.rank AND o.op = f.op AND o.bytes = f.bytes
  JOIN processes p ON o.job = p.job AND o.host = p.host AND o.trace = p.trace
  WHERE o.timing = 'gpu' AND o.launch_ops = 1 AND NOT o.replayed AND NOT o.captured AND o.host_begin_ns > f.first_ns
  GROUP BY o.job, p.nccl_version, o.op, o.bytes, o.nranks
)
SELECT nccl_version, op, bytes, nranks, count(*) AS jobs, percentile_disc(0.5) WITHIN GROUP (ORDER BY p50_us) AS p50_us,
       bytes / percentile_disc(0.5) WITHIN GROUP (ORDER BY p50_us) / 1e3 *
         CASE WHEN op = 'ncclAllReduce' THEN 2.0 * (greatest(nranks, 1) - 1) / greatest(nranks, 1)
              WHEN op IN ('ncclAllGather', 'ncclReduceScatter', 'ncclAlltoAll', 'ncclGather', 'ncclScatter')
                THEN 1.0 * (greatest(nranks, 1) - 1) / greatest(nranks, 1)
              ELSE 1.0 END AS busbw_gbps
FROM per_job
GROUP BY nccl_version, op, bytes, nranks
ORDER BY op, bytes, nccl_version
