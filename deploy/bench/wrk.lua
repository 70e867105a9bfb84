-- wrk script of the benchmark harness (run.sh): the peak runs.
-- Environment: WRK_METHOD (GET or POST), WRK_TOKEN (bearer token, may be
-- empty), WRK_RUN (a run-unique prefix for the Idempotency-Keys).
-- A POST carries a fresh Idempotency-Key per request ("<run>-<thread>-<n>",
-- quoted as contract §5's structured string) and a 31-byte JSON body; a GET is
-- wrk's static request. done() prints one line "WRKJSON {...}" with the
-- requests, duration (s), requests per second, latency percentiles (ms),
-- non-2xx/3xx answers and socket errors, for run.sh to parse.
local method = os.getenv("WRK_METHOD") or "GET"
local token = os.getenv("WRK_TOKEN") or ""
local run = os.getenv("WRK_RUN") or tostring(os.time())
local nthreads = 0

function setup(thread)
  nthreads = nthreads + 1
  thread:set("tid", nthreads)
end

function init(args)
  wrk.method = method
  if token ~= "" then wrk.headers["Authorization"] = "Bearer " .. token end
  if method == "POST" then
    wrk.headers["Content-Type"] = "application/json"
    wrk.body = '{"amount":100,"currency":"EUR"}'
  end
end

if method == "POST" then
  local n = 0
  function request()
    n = n + 1
    wrk.headers["Idempotency-Key"] = string.format('"w%s-%d-%d"', run, tid, n)
    return wrk.format()
  end
end

function done(summary, latency, requests)
  local s = summary.duration / 1e6
  local e = summary.errors
  local ms = function(p) return latency:percentile(p) / 1000 end
  io.write(string.format('WRKJSON {"requests":%d,"seconds":%.3f,"throughput_rps":%.1f,' ..
    '"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,"non_2xx_3xx":%d,"errors":{"connect":%d,"read":%d,' ..
    '"write":%d,"timeout":%d}}\n', summary.requests, s, summary.requests / s, ms(50), ms(90), ms(99),
    e.status, e.connect, e.read, e.write, e.timeout))
end
