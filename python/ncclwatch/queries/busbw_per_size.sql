-- Bus bandwidth per communicator, op and size, with nccl-tests' conventions, as
-- `ncclwatch-report latency` gives it: the median GPU time (the lower of the middle two, as the
-- report takes it) of the steady state over every rank, each rank's first call of an op and size
-- on a communicator (NCCL's connection set-up) left out; algbw = bytes / time, busbw = algbw x
-- 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 otherwise.
-- Launches of one op only (a group is one launch).
WITH calls AS (
  SELECT job, comm_id, op, bytes, nranks, gpu_begin_ns, gpu_end_ns, launch_ops, replayed, timing,
         row_number() OVER (PARTITION BY job, host, trace, comm_id, op, bytes ORDER BY host_begin_ns, seq) AS call
  FROM ops
  WHERE NOT captured
),
steady AS (
  SELECT job, comm_id, op, bytes, nranks, (gpu_end_ns - gpu_begin_ns) / 1e3 AS us
  FROM calls
  WHERE call > 1 AND timing = 'gpu' AND launch_ops = 1 AND NOT replayed
)
SELECT job, comm_id, op, bytes, nranks, count(*) AS samples,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY us) AS p50_us,
       bytes / percentile_disc(0.5) WITHIN GROUP (ORDER BY us) / 1e3 AS algbw_gbps,
       bytes / percentile_disc(0.5) WITHIN GROUP (ORDER BY us) / 1e3 *
         CASE WHEN op = 'ncclAllReduce' THEN 2.0 * (nranks - 1) / nranks
              WHEN op IN ('ncclAllGather', 'ncclReduceScatter', 'ncclAlltoAll') THEN 1.0 * (nranks - 1) / nranks
              ELSE 1.0 END AS busbw_gbps
FROM steady
GROUP BY job, comm_id, op, bytes, nranks
ORDER BY job, comm_id, op, bytes
