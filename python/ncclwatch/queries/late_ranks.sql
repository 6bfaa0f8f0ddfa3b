-- Per-rank lateness: for every collective that all of a communicator's traced ranks started on the
-- GPU, which rank started last and by how much after the one before it (a tie to the nanosecond
-- goes to the lower rank). The ranks that are last far
-- more often than 1 in n, by much, are stragglers (as `ncclwatch-report hang` judges them).
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
complete AS (
  SELECT s.job, s.comm_id, s.seq
  FROM starts s JOIN present p ON s.job = p.job AND s.comm_id = p.comm_id
  WHERE p.ranks >= 2
  GROUP BY s.job, s.comm_id, s.seq, p.ranks
  HAVING count(*) = p.ranks
),
judged AS (
  SELECT job, comm_id, count(*) AS seqs_judged FROM complete GROUP BY job, comm_id
),
ordered AS (
  SELECT s.job, s.host, s.comm_id, s.seq, s.rank, s.t,
         row_number() OVER (PARTITION BY s.job, s.comm_id, s.seq ORDER BY s.t DESC, s.rank) AS place,
         lead(s.t) OVER (PARTITION BY s.job, s.comm_id, s.seq ORDER BY s.t DESC, s.rank) AS before_it
  FROM starts s JOIN complete c ON s.job = c.job AND s.comm_id = c.comm_id AND s.seq = c.seq
)
SELECT o.job, o.comm_id, o.rank, min(o.host) AS host,
       count(*) AS times_last, min(j.seqs_judged) AS seqs_judged,
       avg(o.t - o.before_it) / 1e6 AS mean_late_ms,
       max(o.t - o.before_it) / 1e6 AS max_late_ms
FROM ordered o JOIN judged j ON o.job = j.job AND o.comm_id = j.comm_id
WHERE o.place = 1
GROUP BY o.job, o.comm_id, o.rank
ORDER BY o.job, o.comm_id, times_last DESC, o.rank
