-- Bus bandwidth per communicator, op and size, with nccl-tests' conventions, as
-- `ncclwatch-report latency` gives it: the median GPU time (the lower of the middle two, as the
-- report takes it) of the steady state over every rank, each rank's first call of an op and size
-- on a communicator (NCCL's connection set-up) left out; algbw = bytes / time, busbw = algbw x
-- 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter, all-to-all, gather and
-- scatter, 1 otherwise (n taken as 1 where unknown).
-- Launches of one op only (a group is one launch).
WITH firsts AS (
  SELECT job, host, trace, comm_id, rank, op, bytes, min(host_begin_ns) AS first_ns
  FROM ops
  WHERE NOT captured
  GROUP BY job, host, trace, comm_id, rank, op, bytes
),
steady AS (
  SELECT o.job, o.comm_id, o.op, o.bytes, o.nranks, (o.gpu_end_ns - o.gpu_begin_ns) / 1e3 AS us
  FROM ops o JOIN firsts f ON o.job = f.job AND o.host = f.host AND o.trace = f.trace AND o.comm_id = f.comm_id
                              AND o.rank = f.rank AND o.op = f.op AND o.bytes = f.bytes
  WHERE o.timing = 'gpu' AND o.launch_ops = 1 AND NOT o.replayed AND NOT o.captured AND o.host_begin_ns > f.first_ns
)
SELECT job, comm_id, op, bytes, nranks, count(*) AS samples,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY us) AS p50_us,
       bytes / percentile_disc(0.5) WITHIN GROUP (ORDER BY us) / 1e3 AS algbw_gbps,
       bytes / percentile_disc(0.5) WITHIN GROUP (ORDER BY us) / 1e3 *
         CASE WHEN op = 'ncclAllReduce' THEN 2.0 * (greatest(nranks, 1) - 1) / greatest(nranks, 1)
              WHEN op IN ('ncclAllGather', 'ncclReduceScatter', 'ncclAlltoAll', 'ncclGather', 'ncclScatter')
                THEN 1.0 * (greatest(nranks, 1) - 1) / greatest(nranks, 1)
              ELSE 1.0 END AS busbw_gbps
FROM steady
GROUP BY job, comm_id, op, bytes, nranks
ORDER BY job, comm_id, op, bytes
