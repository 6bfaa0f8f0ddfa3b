-- The calls latency and bandwidth are judged on, as `ncclwatch-report latency` judges them: GPU-timed
-- (start and end on the GPU), one op in its launch (a group is one launch), not a CUDA graph's
-- replay, and not a rank's first call of its op and size on a communicator (NCCL's connection
-- set-up). us: its GPU time; busbw_factor: nccl-tests' factor for the op, 2(n-1)/n for
-- all-reduce, (n-1)/n for all-gather, reduce-scatter, all-to-all, gather and scatter, 1 otherwise
-- (n taken as 1 where unknown).
WITH firsts AS (
  SELECT job, host, trace, comm_id, rank, op, bytes, min(host_begin_ns) AS first_ns
  FROM ops
  WHERE NOT captured
  GROUP BY job, host, trace, comm_id, rank, op, bytes
)
SELECT o.job, o.host, o.trace, o.comm_id, o.rank, o.nranks, o.seq, o.op, o.bytes,
       (o.gpu_end_ns - o.gpu_begin_ns) / 1e3 AS us,
       CASE WHEN o.op = 'ncclAllReduce' THEN 2.0 * (greatest(o.nranks, 1) - 1) / greatest(o.nranks, 1)
            WHEN o.op IN ('ncclAllGather', 'ncclReduceScatter', 'ncclAlltoAll', 'ncclGather', 'ncclScatter')
              THEN 1.0 * (greatest(o.nranks, 1) - 1) / greatest(o.nranks, 1)
            ELSE 1.0 END AS busbw_factor
FROM ops o JOIN firsts f ON o.job = f.job AND o.host = f.host AND o.trace = f.trace AND o.comm_id = f.comm_id
                            AND o.rank = f.rank AND o.op = f.op AND o.bytes = f.bytes
WHERE o.timing = 'gpu' AND o.launch_ops = 1 AND NOT o.replayed AND NOT o.captured AND o.host_begin_ns > f.first_ns
