-- Bus bandwidth per communicator, op and size, with nccl-tests' conventions, as
-- `ncclwatch-report latency` gives it: the median GPU time of the steady state over every rank
-- (view steady_gpu_calls; the lower of the middle two, as the report takes it); algbw = bytes /
-- time, busbw = algbw x nccl-tests' factor for the op (busbw_factor).
SELECT job, comm_id, op, bytes, nranks, count(*) AS samples,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY us) AS p50_us,
       bytes / percentile_disc(0.5) WITHIN GROUP (ORDER BY us) / 1e3 AS algbw_gbps,
       bytes / percentile_disc(0.5) WITHIN GROUP (ORDER BY us) / 1e3 * min(busbw_factor) AS busbw_gbps
FROM steady_gpu_calls
GROUP BY job, comm_id, op, bytes, nranks
ORDER BY job, comm_id, op, bytes
