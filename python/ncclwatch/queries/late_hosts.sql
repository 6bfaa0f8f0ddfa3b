-- Which hosts are late across many jobs: in each job, the host whose ranks started collectives
-- last most often (view last_starts); then, per host, the jobs where it was that host.
WITH per_host AS (
  SELECT job, host, count(*) AS times_last
  FROM last_starts
  GROUP BY job, host
),
latest AS (
  SELECT job, host, times_last, row_number() OVER (PARTITION BY job ORDER BY times_last DESC, host) AS place
  FROM per_host
)
SELECT host, count(*) AS jobs_latest, (SELECT count(DISTINCT job) FROM ops) AS jobs, sum(times_last) AS times_last
FROM latest
WHERE place = 1
GROUP BY host
ORDER BY jobs_latest DESC, host
