-- Which hosts are late across many jobs: in each job, the host whose ranks started last most often
-- (GPU starts of the collectives every traced rank of a communicator started); then, per host, the
-- jobs where it was that host.
WITH starts AS (
  SELECT job, host, comm_id, seq, rank, gpu_begin_ns AS t
  FROM ops
  WHERE seq > 0 AND peer IS NULL AND rank >= 0 AND gpu_begin_ns IS NOT NULL
),
present AS (  -- the ranks with any op on the communicator
  SELECT job, comm_id, count(DISTINCT rank) AS ranks
  FROM ops
  WHERE rank >= 0
  GROUP BY job, comm_id
),
ordered AS (
  SELECT s.job, s.host, s.comm_id, s.seq,
         row_number() OVER (PARTITION BY s.job, s.comm_id, s.seq ORDER BY s.t DESC, s.rank) AS place,
         count(*) OVER (PARTITION BY s.job, s.comm_id, s.seq) AS started,
         p.ranks
  FROM starts s JOIN present p ON s.job = p.job AND s.comm_id = p.comm_id
),
per_host AS (
  SELECT job, host, count(*) AS times_last
  FROM ordered
  WHERE place = 1 AND started = ranks AND ranks >= 2
  GROUP BY job, host
),
latest AS (
  SELECT job, host, times_last,
         row_number() OVER (PARTITION BY job ORDER BY times_last DESC, host) AS place
  FROM per_host
)
SELECT host, count(*) AS jobs_latest,
       (SELECT count(DISTINCT job) FROM ops) AS jobs,
       sum(times_last) AS times_last
FROM latest
WHERE place = 1
GROUP BY host
ORDER BY jobs_latest DESC, host
