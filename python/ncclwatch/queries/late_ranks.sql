-- Per-rank lateness: how often each rank started a collective last on the GPU, of the collectives
-- every traced rank of its communicator started there, and by how much after the rank before it
-- (view last_starts). The ranks that are last far more often than 1 in n, by much, are stragglers,
-- as `ncclwatch-report hang` judges them.
SELECT job, comm_id, rank, min(host) AS host, count(*) AS times_last,
       min(judged) AS seqs_judged, avg(late_ns) / 1e6 AS mean_late_ms, max(late_ns) / 1e6 AS max_late_ms
FROM (SELECT *, count(*) OVER (PARTITION BY job, comm_id) AS judged FROM last_starts) s
GROUP BY job, comm_id, rank
ORDER BY job, comm_id, times_last DESC, rank
