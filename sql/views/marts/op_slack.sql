-- depends on: critical_path, op_slack_rows
-- Per run, step, rank and op of a replayed step: how much one call of the op could grow before
-- some rank's window of the step grows (0: on the critical path). Only runs whose critical path
-- is current (critical_path shows a run's reason where it is not).
CREATE OR REPLACE VIEW op_slack AS
SELECT o.study, o.run_id, o.step, o.rank, o.op, o.kind, o.calls, o.dur_us, o.slack_us
FROM op_slack_rows AS o
SEMI JOIN (SELECT DISTINCT study, run_id FROM critical_path WHERE reason IS NULL) AS c
    ON c.study = o.study AND c.run_id = o.run_id
