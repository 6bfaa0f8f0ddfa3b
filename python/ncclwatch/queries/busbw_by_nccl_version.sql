-- How bus bandwidth per op and size moves between NCCL versions, across every job exported: per
-- version, the median over jobs of each job's median steady-state GPU time (view
-- steady_gpu_calls), and the busbw that gives (see busbw_per_size).
WITH per_job AS (
  SELECT c.job, p.nccl_version, c.op, c.bytes, c.nranks, percentile_disc(0.5) WITHIN GROUP (ORDER BY c.us) AS p50_us,
         min(c.busbw_factor) AS busbw_factor
  FROM steady_gpu_calls c JOIN processes p ON c.job = p.job AND c.host = p.host AND c.trace = p.trace
  GROUP BY c.job, p.nccl_version, c.op, c.bytes, c.nranks
)
SELECT nccl_version, op, bytes, nranks, count(*) AS jobs,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY p50_us) AS p50_us,
       bytes / percentile_disc(0.5) WITHIN GROUP (ORDER BY p50_us) / 1e3 * min(busbw_factor) AS busbw_gbps
FROM per_job
GROUP BY nccl_version, op, bytes, nranks
ORDER BY op, bytes, nccl_version
