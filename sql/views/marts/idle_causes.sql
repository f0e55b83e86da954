-- depends on: window_breakdown, window_idle_causes
-- Why the device sat idle (METHODOLOGY "Why the step waits", idle causes), per rank and step
-- window: idle_us split into host wait (the host had not yet asked for the next work), device
-- wait (it was queued but had not started) and unknown (the next work's launch is not in the
-- trace); the three sum to idle_us exactly. CPU-only ranks have no idle causes (NULL).
CREATE OR REPLACE VIEW idle_causes AS
SELECT
    w.study, w.run_id, w.rank, w.step,
    w.start_ns AS window_start_unix_ns,
    w.window_ns / 1000.0 AS window_us,
    w.idle_ns / 1000.0 AS idle_us,
    c.idle_host_wait_ns / 1000.0 AS idle_host_wait_us,
    c.idle_device_wait_ns / 1000.0 AS idle_device_wait_us,
    c.idle_unknown_ns / 1000.0 AS idle_unknown_us,
    w.rule
FROM window_breakdown AS w
LEFT JOIN window_idle_causes AS c
    ON w.study = c.study AND w.run_id = c.run_id AND w.rank = c.rank AND w.window_no = c.window_no
WHERE w.scope = 'step';
