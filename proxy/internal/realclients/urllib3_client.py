"""A Python caller of the proxy: requests over urllib3's Retry, as
TestURLLib3* in urllib3_test.go drive it. Prints one JSON object: the
final status, the proxy's Callout-Outcome, Callout-Problem and
Idempotent-Replayed headers, and the statuses of the tries urllib3 retried
(None for a try without an answer, e.g. a read timeout).

    python3 urllib3_client.py POLICY METHOD URL TOKEN [IDEMPOTENCY-KEY]

POLICY: "outcome" (FollowCalloutOutcome, the recipe of docs/contract.md
section 2, "Generic HTTP clients"), "forcelist" (Retry with 503 in
status_forcelist, what generic retry set-ups do) or "default" (Retry with
urllib3's defaults). Every try has a 1 s read timeout, the caller's own.
"""

import json
import sys

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError
from urllib3.util.retry import Retry


class FollowCalloutOutcome(Retry):
    """Retry what the proxy classes retryable, and its 409 in-flight (the
    key's first attempt is still running: ask again after Retry-After),
    and nothing else it answers; without an answer from the proxy (a
    timeout, a reset), urllib3's own rules. A 202 is never retried (urllib3
    retries no 2xx): the proxy goes on with the callout; poll its Location
    instead."""

    def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None):
        outcome = response.headers.get("Callout-Outcome") if response is not None else None
        in_flight = response is not None and response.headers.get("Callout-Problem") == "in-flight"
        if outcome is not None and outcome != "retryable" and not in_flight:
            # With raise_on_status=False urllib3 hands this answer back.
            raise MaxRetryError(_pool, url, "Callout-Outcome: " + outcome)
        return super().increment(method, url, response, error, _pool, _stacktrace)


def retry(policy):
    if policy == "outcome":
        kw = dict(total=30, backoff_factor=0.1, status_forcelist=[409, 429, 500, 502, 503, 504],
                  allowed_methods=None,  # writes too: they carry an Idempotency-Key
                  raise_on_status=False)
        if "retry_after_max" in Retry.__init__.__code__.co_varnames:  # urllib3 2.4+
            kw["retry_after_max"] = 30
        return FollowCalloutOutcome(**kw)
    if policy == "forcelist":
        return Retry(total=2, backoff_factor=0, status_forcelist=[503], raise_on_status=False)
    return Retry(total=2, raise_on_status=False)


def main():
    policy, method, url, token = sys.argv[1:5]
    headers = {"Authorization": token}
    if len(sys.argv) > 5:
        headers["Idempotency-Key"] = sys.argv[5]
    s = requests.Session()
    s.mount("http://", HTTPAdapter(max_retries=retry(policy)))
    resp = s.request(method, url, headers=headers, data=b'{"amount":1}' if method == "POST" else None,
                     timeout=(5, 1))
    history = [h.status for h in resp.raw.retries.history] if resp.raw.retries else []
    print(json.dumps({
        "status": resp.status_code,
        "outcome": resp.headers.get("Callout-Outcome"),
        "problem": resp.headers.get("Callout-Problem"),
        "replayed": resp.headers.get("Idempotent-Replayed"),
        "body": resp.text,
        "retried": history,
    }))


if __name__ == "__main__":
    main()
