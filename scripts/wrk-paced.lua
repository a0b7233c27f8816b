-- wrk paces each connection: one request, then a pause, so that connections × 1000 / PAUSE_MS
-- requests a second arrive (wrk alone sends as fast as it can). PAUSE_MS comes from the env.
local pause = tonumber(os.getenv("PAUSE_MS") or "20")
function delay()
  return pause
end
