package moto

// strictPatch is the strict layer: the limits AWS enforces and moto 5.2.5
// does not, added to the patched server so that every process and container
// that talks to it (the tests, the local pipeline, the Lambda binaries under
// aws-lambda-rie, sam local) meets them, and limits an account or a table
// shares are counted once. Each rule names the AWS page it comes from; its
// knobs default to AWS's documented values (DefaultStrict, checked by
// TestStrictDefaults) and are set by MOTO_STRICT_<KNOB> at start or
// through the control API (/moto-api/strict, see control.go). NOTES.md
// says, rule by rule, what moto does and what AWS does.
//
// Meters (throughput windows, the SSM bucket, the stale-read window) run on
// the server's clock unless a test sets a resource's clock (SetClock); the
// TTL reaper runs on the clock of the request (the X-Strict-Now header that
// WithClock adds), so a store under a fake clock sees its items expire when
// its clock passes their TTL.
const strictPatch = `
# ---- strict layer ----
import base64 as _b64, copy as _copy, heapq as _heapq, json as _json, math as _math, os as _os, random as _random, re as _re
from moto.dynamodb.models.dynamo_type import DynamoType as _DT
import moto.dynamodb.responses as _dr
from moto.core.exceptions import JsonRESTError as _JsonRESTError, ServiceException as _ServiceException

_STRICT_DEFAULTS = {
    # SQS: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
    "sqs_valid_chars": True,
    "sqs_byte_size": True,
    # https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/standard-queues-at-least-once-delivery.html
    "sqs_redeliver_share": 0.005,
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html
    "dynamodb_partition_wcu": 1000,
    "dynamodb_partition_rcu": 3000,
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode.html
    "dynamodb_ondemand_wcu": 4000,
    "dynamodb_ondemand_rcu": 12000,
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html
    "dynamodb_stale_read_ms": 1000,
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/howitworks-ttl.html
    "dynamodb_ttl": True,
    "dynamodb_ttl_max_delay_s": 172800,
    # https://docs.aws.amazon.com/general/latest/gr/ssm.html
    "ssm_tps": 40,
    "ssm_higher_throughput": False,
    "ssm_higher_tps": 10000,
    "ssm_by_path_higher_tps": 100,
}
_STRICT_OFF = {k: (False if isinstance(v, bool) else 0) for k, v in _STRICT_DEFAULTS.items()}
_strict_lock = threading.RLock()

def _strict_from_env():
    c = dict(_STRICT_DEFAULTS)
    if _os.environ.get("MOTO_STRICT", "").lower() in ("0", "off", "false", "no"):
        c.update(_STRICT_OFF)
    for k in _STRICT_DEFAULTS:
        v = _os.environ.get("MOTO_STRICT_" + k.upper())
        if v is not None and v != "":
            c[k] = _json.loads(v.lower() if v.lower() in ("true", "false") else v)
    c["tables"], c["queues"] = {}, {}
    return c

_cfg = _strict_from_env()
_clocks = {}
_counters = {}

def _knob(name, table=None, queue=None):
    if table is not None:
        o = _cfg["tables"].get(table)
        if o and name in o:
            return o[name]
    if queue is not None:
        o = _cfg["queues"].get(queue)
        if o and name in o:
            return o[name]
    return _cfg[name]

def _count(name, scope, n=1):
    with _strict_lock:
        d = _counters.setdefault(name, {})
        d[scope] = d.get(scope, 0) + n

def _count_max(name, scope, v):
    with _strict_lock:
        d = _counters.setdefault(name, {})
        if v > d.get(scope, 0):
            d[scope] = v

def _meter_now(scope):
    t = _clocks.get(scope)
    if t is None:
        t = _clocks.get("*")
    return time.time() if t is None else t

def _request_now(scope):
    t = getattr(_tls, "now", None)
    return _meter_now(scope) if t is None else t

# -- the control API and the request's clock --
def _strict_control(environ, start_response):
    path = environ.get("PATH_INFO", "")
    status, out = "200 OK", None
    try:
        body = b""
        n = int(environ.get("CONTENT_LENGTH") or 0)
        if n:
            body = environ["wsgi.input"].read(n)
        req = _json.loads(body) if body else {}
        # The order every path takes: DynamoDB's lock, then the layer's.
        with _dynamo_lock, _strict_lock:
            if path.rstrip("/") == "/moto-api/strict":
                out = {"defaults": _STRICT_DEFAULTS, "config": _cfg, "counters": _counters, "clocks": _clocks}
            elif path == "/moto-api/strict/config":
                if req.pop("reset", False):
                    _cfg.clear(); _cfg.update(_strict_from_env()); _buckets.clear()
                if req.pop("off", False):
                    _cfg.update(_STRICT_OFF)
                for k, v in req.items():
                    if k in ("tables", "queues"):
                        for name, o in v.items():
                            for kk in o:
                                if kk not in _STRICT_DEFAULTS:
                                    raise KeyError(kk)
                            if o:
                                _cfg[k].setdefault(name, {}).update(o)
                            else:
                                _cfg[k].pop(name, None)
                    elif k in _STRICT_DEFAULTS:
                        _cfg[k] = v
                    else:
                        raise KeyError(k)
                _buckets.clear()
                out = {"config": _cfg}
            elif path == "/moto-api/strict/clock":
                scope = req["scope"]
                if "now" in req and req["now"] is None:
                    _clocks.pop(scope, None)
                elif "now" in req:
                    _clocks[scope] = float(req["now"])
                if req.get("advance"):
                    _clocks[scope] = _meter_now(scope) + float(req["advance"])
                out = {"clocks": _clocks}
            else:
                status, out = "404 Not Found", {"error": "no such strict endpoint " + path}
    except (KeyError, ValueError, TypeError) as e:
        status, out = "400 Bad Request", {"error": "strict control: %r" % (e,)}
    data = _json.dumps(out).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]

_app_call = wa.DomainDispatcherApplication.__call__
def _strict_call(self, environ, start_response):
    if environ.get("PATH_INFO", "").startswith("/moto-api/strict"):
        return _strict_control(environ, start_response)
    h = environ.get("HTTP_X_STRICT_NOW")
    _tls.now = float(h) / 1000.0 if h else None
    return _app_call(self, environ, start_response)
wa.DomainDispatcherApplication.__call__ = _strict_call

# -- DynamoDB: item sizes as DynamoDB bills them (internal/billing/size.go) --
def _num_size(s):
    s = str(s)
    neg = s.startswith("-")
    s = s.lstrip("+-")
    for i, ch in enumerate(s):
        if ch in "eE":
            s = s[:i]
            break
    digits = s.replace(".", "", 1).strip("0")
    n = (max(len(digits), 1) + 1) // 2 + 1
    return n + 1 if neg else n

def _blen(x):
    if isinstance(x, (bytes, bytearray)):
        return len(x)
    try:
        return len(_b64.b64decode(x))
    except Exception:
        return len(str(x).encode("utf-8", "surrogatepass"))

def _slen(x):
    return len(str(x).encode("utf-8", "surrogatepass"))

def _attr_size(v):
    if isinstance(v, _DT):
        t, x = v.type, v.value
    else:
        (t, x), = v.items()
    if t == "S":
        return _slen(x)
    if t == "N":
        return _num_size(x)
    if t == "B":
        return _blen(x)
    if t in ("BOOL", "NULL"):
        return 1
    if t == "L":
        return 3 + sum(1 + _attr_size(e) for e in x)
    if t == "M":
        return 3 + sum(1 + _slen(k) + _attr_size(e) for k, e in x.items())
    if t == "SS":
        return sum(_slen(e) for e in x)
    if t == "NS":
        return sum(_num_size(e) for e in x)
    if t == "BS":
        return sum(_blen(e) for e in x)
    return 0

def _item_size(item):
    if item is None:
        return 0
    attrs = item.attrs if hasattr(item, "attrs") else item
    return sum(_slen(k) + _attr_size(v) for k, v in attrs.items())

def _kstr(key):
    return _json.dumps(key, sort_keys=True)

def _key_of(table, attrs):
    k = {table.hash_key_attr: attrs[table.hash_key_attr]}
    if table.range_key_attr:
        k[table.range_key_attr] = attrs[table.range_key_attr]
    return k

def _item_key(table, item):
    k = {table.hash_key_attr: item.attrs[table.hash_key_attr].to_json()}
    if table.range_key_attr:
        k[table.range_key_attr] = item.attrs[table.range_key_attr].to_json()
    return k

def _get(table, key):
    try:
        h = _DT(key[table.hash_key_attr])
        r = _DT(key[table.range_key_attr]) if table.range_key_attr else None
        return table.get_item(h, r)
    except Exception:
        return None

def _table(backend, name):
    try:
        return backend.get_table(name)
    except Exception:
        return None

# -- DynamoDB: throughput windows (a sliding second) --
_windows = {}   # (table, pk or "", "r"/"w") -> [deque of (t, units), sum]
_DDB = "com.amazonaws.dynamodb.v20120810#"

class _Throttled(_JsonRESTError):
    def __init__(self, table, what, reason):
        on_demand = getattr(table, "billing_mode", None) == "PAY_PER_REQUEST"
        name = "ThrottlingException" if on_demand else "ProvisionedThroughputExceededException"
        super().__init__(_DDB + name, "Throughput exceeds the current capacity of " + what + " (strict layer)")
        body = {"__type": self.error_type, "message": self.message}
        if reason:
            body["ThrottlingReasons"] = [{"reason": reason, "resource": getattr(table, "table_arn", table.name)}]
        self.description = _json.dumps(body)

def _window(key, now):
    w = _windows.get(key)
    if w is None:
        w = _windows[key] = [collections.deque(), 0.0]
    d = w[0]
    while d and d[0][0] <= now - 1.0:
        w[1] -= d.popleft()[1]
    return w

def _limits(table, rw):
    name = table.name
    part = _knob("dynamodb_partition_wcu" if rw == "w" else "dynamodb_partition_rcu", table=name)
    tab = 0
    if getattr(table, "billing_mode", None) == "PAY_PER_REQUEST":
        tab = _knob("dynamodb_ondemand_wcu" if rw == "w" else "dynamodb_ondemand_rcu", table=name)
    return part, tab

def _check(table, pk, rw, units, now):
    part, tab = _limits(table, rw)
    kind = "Write" if rw == "w" else "Read"
    if part and pk is not None and _window((table.name, pk, rw), now)[1] + units > part:
        _count("dynamodb_throttles", table.name)
        raise _Throttled(table, "partition key %s of table %s (%d %s units a second)" % (pk, table.name, part, kind.lower()), "Table" + kind + "KeyRangeThroughputExceeded")
    if tab and _window((table.name, "", rw), now)[1] + units > tab:
        _count("dynamodb_throttles", table.name)
        raise _Throttled(table, "table %s (warm throughput %d %s units a second)" % (table.name, tab, kind.lower()), None)

def _record(table, pk, rw, units, now):
    for k in ((table.name, pk, rw), (table.name, "", rw)):
        if k[1] is None:
            continue
        w = _window(k, now)
        w[0].append((now, units))
        w[1] += units
        if k[1] != "":
            _count_max("dynamodb_max_partition_" + ("wcu" if rw == "w" else "rcu"), table.name, w[1])
    if len(_windows) > 20000:
        for k in [k for k, w in _windows.items() if not w[0] or w[0][-1][0] <= now - 1.0]:
            del _windows[k]

# -- DynamoDB: recent versions, for eventually consistent reads --
_history = {}   # table -> {kstr: [(t, old item or None)]}

def _remember(table, key, old, now):
    if not _knob("dynamodb_stale_read_ms", table=table.name):
        return
    h = _history.setdefault(table.name, {})
    ks = _kstr(key)
    window = _knob("dynamodb_stale_read_ms", table=table.name) / 1000.0
    lst = [e for e in h.get(ks, []) if e[0] > now - window]
    lst.append((now, old))
    h[ks] = lst
    if len(h) > 5000:
        for k in [k for k, l in h.items() if l[-1][0] <= now - window]:
            del h[k]

def _version_at(table_name, key, t):
    lst = _history.get(table_name, {}).get(_kstr(key))
    if lst:
        for wt, old in lst:
            if wt > t:
                return True, old
    return False, None

# -- DynamoDB: TTL --
_ttl = {}   # table -> {"heap": [(ttl, kstr)], "items": {kstr: (ttl, r, key)}, "due": {kstr: entry}}

def _ttl_attr(table):
    t = getattr(table, "ttl", None) or {}
    if t.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") and _knob("dynamodb_ttl", table=table.name):
        return t.get("AttributeName")
    return None

def _ttl_note(table, key, item):
    attr = _ttl_attr(table)
    if not attr:
        return
    idx = _ttl.setdefault(table.name, {"heap": [], "items": {}, "due": {}})
    ks = _kstr(key)
    v = item.attrs.get(attr) if item is not None else None
    if v is None or v.type != "N":
        idx["items"].pop(ks, None)
        return
    try:
        exp = float(v.value)
    except ValueError:
        idx["items"].pop(ks, None)
        return
    idx["items"][ks] = (exp, _random.random(), key)
    _heapq.heappush(idx["heap"], (exp, ks))

def _reap(table):
    if not _ttl_attr(table):
        return
    idx = _ttl.get(table.name)
    if not idx:
        return
    now = _request_now("table:" + table.name)
    heap, items, due = idx["heap"], idx["items"], idx["due"]
    while heap and heap[0][0] <= now:
        exp, ks = _heapq.heappop(heap)
        e = items.get(ks)
        if e is not None and e[0] == exp:
            due[ks] = e
    if not due:
        return
    delay = _knob("dynamodb_ttl_max_delay_s", table=table.name)
    for ks, e in list(due.items()):
        cur = items.get(ks)
        if cur is None or cur[0] != e[0]:
            del due[ks]
            continue
        exp, r, key = cur
        if exp + r * delay <= now:
            old = _get(table, key)
            if old is not None:
                try:
                    table.delete_item(_DT(key[table.hash_key_attr]), _DT(key[table.range_key_attr]) if table.range_key_attr else None)
                except Exception:
                    continue
                _remember(table, key, _copy.deepcopy(old), _meter_now("table:" + table.name))
                _count("dynamodb_ttl_deleted", table.name)
            del due[ks]
            del items[ks]

_update_ttl = dm.DynamoDBBackend.update_time_to_live
def _strict_update_ttl(self, table_name, ttl_spec):
    with _dynamo_lock:
        out = _update_ttl(self, table_name, ttl_spec)
        table = _table(self, table_name)
        if table is not None and _ttl_attr(table):
            _ttl.pop(table_name, None)
            for item in table.all_items():
                _ttl_note(table, _item_key(table, item), item)
        return out
dm.DynamoDBBackend.update_time_to_live = _strict_update_ttl

# -- DynamoDB: the operations --
def _writes(body, op):
    if op == "put_item":
        return [(body["TableName"], None, body["Item"], False)]
    if op in ("update_item", "delete_item"):
        return [(body["TableName"], body["Key"], None, False)]
    out = []
    if op == "transact_write_items":
        for a in body.get("TransactItems", []):
            for kind, x in a.items():
                out.append((x["TableName"], x.get("Key"), x.get("Item") if kind == "Put" else None, kind == "ConditionCheck"))
    elif op == "batch_write_item":
        for t, reqs in body.get("RequestItems", {}).items():
            for r in reqs:
                for kind, x in r.items():
                    out.append((t, x.get("Key"), x.get("Item") if kind == "PutRequest" else None, False))
    return out

def _wunits(size, factor):
    return max(1, _math.ceil(size / 1024.0)) * factor

def _runits(size, consistent):
    u = max(1, _math.ceil(size / 4096.0))
    return u if consistent else u / 2.0

def _pk_of(table, key):
    return _json.dumps(key[table.hash_key_attr], sort_keys=True)

def _do_write(self, op, orig):
    backend = self.dynamodb_backend
    factor = 2 if op == "transact_write_items" else 1
    entries = []
    reaped = set()
    for tname, key, item, check_only in _writes(self.body, op):
        table = _table(backend, tname)
        if table is None:
            return orig(self)
        try:
            if key is None:
                key = _key_of(table, item)
        except KeyError:
            return orig(self)
        if tname not in reaped:
            reaped.add(tname)
            _reap(table)
        old = _get(table, key)
        size = max(_item_size(old), _item_size(item) if item else 0)
        entries.append([table, key, _copy.deepcopy(old), _wunits(size, factor), check_only])
    for table, key, old, units, _c in entries:
        _check(table, _pk_of(table, key), "w", units, _meter_now("table:" + table.name))
    failed = None
    try:
        out = orig(self)
    except Exception as e:
        failed = e
        # A write refused by its condition is billed all the same.
        billed = type(e).__name__ in ("ConditionalCheckFailed", "TransactionCanceledException")
        if not billed:
            raise
    for table, key, old, units, check_only in entries:
        now = _meter_now("table:" + table.name)
        new = _get(table, key)
        if not check_only:
            units = _wunits(max(_item_size(old), _item_size(new)), factor)
        _record(table, _pk_of(table, key), "w", units, now)
        if failed is None and not check_only:
            _remember(table, key, old, now)
            _ttl_note(table, key, new)
    if failed is not None:
        raise failed
    return out

def _query_pk(table, body):
    expr = body.get("KeyConditionExpression") or ""
    names = body.get("ExpressionAttributeNames") or {}
    values = body.get("ExpressionAttributeValues") or {}
    for name, val in _re.findall(r"([#\w.]+)\s*=\s*(:\w+)", expr):
        if names.get(name, name) == table.hash_key_attr and val in values:
            return _json.dumps(values[val], sort_keys=True)
    return None

def _do_read(self, op, orig):
    backend = self.dynamodb_backend
    body = self.body
    if op == "batch_get_item":
        reads = [(t, k, bool(r.get("ConsistentRead"))) for t, r in body.get("RequestItems", {}).items() for k in r.get("Keys", [])]
    elif op == "transact_get_items":
        reads = [(a["Get"]["TableName"], a["Get"]["Key"], True) for a in body.get("TransactItems", []) if "Get" in a]
    elif op == "get_item":
        reads = [(body["TableName"], body["Key"], bool(body.get("ConsistentRead")))]
    else:
        reads = [(body["TableName"], None, bool(body.get("ConsistentRead")))]
    tables = {}
    for tname, key, consistent in reads:
        table = _table(backend, tname)
        if table is None:
            return orig(self)
        if tname not in tables:
            tables[tname] = table
            _reap(table)
    factor = 2 if op == "transact_get_items" else 1
    planned = []
    for tname, key, consistent in reads:
        table = tables[tname]
        if key is not None:
            try:
                pk = _pk_of(table, key)
            except KeyError:
                return orig(self)
            units = _runits(_item_size(_get(table, key)), consistent) * factor
        else:
            pk = _query_pk(table, body) if op == "query" and not body.get("IndexName") else None
            units = _runits(0, consistent)
        _check(table, pk, "r", units, _meter_now("table:" + tname))
        planned.append((table, key, pk, units, consistent))
    stale = {}
    for tname, key, consistent in reads:
        ms = _knob("dynamodb_stale_read_ms", table=tname)
        if not consistent and ms and op != "transact_get_items":
            stale[tname] = _meter_now("table:" + tname) - _random.random() * ms / 1000.0
    _tls.stale, _tls.read_bytes = stale, 0
    try:
        out = orig(self)
    finally:
        _tls.stale = None
    read_bytes = _tls.read_bytes
    for table, key, pk, units, consistent in planned:
        if key is None:
            units = _runits(read_bytes, consistent)
        _record(table, pk, "r", units, _meter_now("table:" + table.name))
    return out

def _strict_dynamo(op, orig):
    def handler(self):
        with _dynamo_lock:
            if op in ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item"):
                return _do_write(self, op, orig)
            return _do_read(self, op, orig)
    return handler

for _name in ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item", "get_item", "batch_get_item", "query", "scan", "transact_get_items"):
    if hasattr(_dr.DynamoHandler, _name):
        setattr(_dr.DynamoHandler, _name, _strict_dynamo(_name, getattr(_dr.DynamoHandler, _name)))

def _stale_version(table_name, key, item):
    found, old = _version_at(table_name, key, _tls.stale[table_name])
    return old if found else item

_be_get_item = dm.DynamoDBBackend.get_item
def _strict_get_item(self, table_name, keys, projection_expressions=None):
    item = _be_get_item(self, table_name, keys, None)
    stale = getattr(_tls, "stale", None)
    if stale and table_name in stale:
        item = _stale_version(table_name, keys, item)
    if stale is not None:
        _tls.read_bytes = getattr(_tls, "read_bytes", 0) + _item_size(item)
    if item is not None and projection_expressions:
        item = item.project(projection_expressions)
    return item
dm.DynamoDBBackend.get_item = _strict_get_item

def _strict_results(self, table_name, results, index_name):
    if getattr(_tls, "stale", None) is None:
        return results
    table = _table(self, table_name)
    if table is None:
        return results
    out = []
    for it in results:
        try:
            key = _item_key(table, it)
        except KeyError:
            out.append(it)
            continue
        full = _get(table, key)
        if table_name in _tls.stale:
            found, old = _version_at(table_name, key, _tls.stale[table_name])
            if found:
                if old is None:
                    continue
                v = _copy.deepcopy(old)
                v.attrs = {k: a for k, a in v.attrs.items() if k in it.attrs}
                if index_name and any(k not in v.attrs for k in it.attrs):
                    continue
                full, it = old, v
        _tls.read_bytes = getattr(_tls, "read_bytes", 0) + _item_size(full)
        out.append(it)
    return out

_be_query = dm.DynamoDBBackend.query
def _strict_query(self, table_name, *args, **kwargs):
    results, scanned, last = _be_query(self, table_name, *args, **kwargs)
    index_name = kwargs.get("index_name")
    return _strict_results(self, table_name, results, index_name), scanned, last
dm.DynamoDBBackend.query = _strict_query

_be_scan = dm.DynamoDBBackend.scan
def _strict_scan(self, table_name, *args, **kwargs):
    results, scanned, last = _be_scan(self, table_name, *args, **kwargs)
    return _strict_results(self, table_name, results, kwargs.get("index_name")), scanned, last
dm.DynamoDBBackend.scan = _strict_scan

# -- SSM: one token bucket per account --
import moto.ssm.responses as _ssmr
_buckets = {}

def _take(name, rate):
    if not rate:
        return True
    now = _meter_now("ssm")
    b = _buckets.get(name)
    if b is None or b[2] != rate:
        b = _buckets[name] = [float(rate), now, rate]
    b[0] = min(float(rate), b[0] + (now - b[1]) * rate)
    b[1] = now
    if b[0] >= 1.0:
        b[0] -= 1.0
        return True
    return False

def _strict_ssm(op, orig):
    def handler(self):
        with _strict_lock:
            if _knob("ssm_higher_throughput"):
                ok = _take("path", _knob("ssm_by_path_higher_tps")) if op == "get_parameters_by_path" else _take("get", _knob("ssm_higher_tps"))
            else:
                ok = _take("all", _knob("ssm_tps"))
        if not ok:
            _count("ssm_throttles", op)
            raise _JsonRESTError("ThrottlingException", "Rate exceeded (strict layer: Parameter Store throughput)")
        _count("ssm_accepted", op)
        return orig(self)
    return handler

for _name in ("get_parameter", "get_parameters", "get_parameters_by_path"):
    setattr(_ssmr.SimpleSystemManagerResponse, _name, _strict_ssm(_name, getattr(_ssmr.SimpleSystemManagerResponse, _name)))

# -- SQS: characters, sizes in bytes, at-least-once delivery --
import moto.sqs.exceptions as _sqse
_INVALID = _re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

def _msg_bytes(body, attrs):
    n = _slen(body)
    for name, a in (attrs or {}).items():
        n += _slen(name) + _slen(a.get("data_type", a.get("DataType", "")))
        v = a.get("string_value", a.get("StringValue"))
        if v is not None:
            n += _slen(v)
        v = a.get("binary_value", a.get("BinaryValue"))
        if v is not None:
            n += _blen(v)
    return n

def _msg_error(queue, body, attrs):
    if _knob("sqs_valid_chars", queue=queue.name):
        m = _INVALID.search(body)
        if m:
            _count("sqs_invalid", queue.name)
            return _sqse.SQSException("InvalidMessageContents", "Invalid characters found. Deleted message body or attribute holds U+%04X at %d (strict layer)" % (ord(m.group()), m.start()))
    if _knob("sqs_byte_size", queue=queue.name):
        n = _msg_bytes(body, attrs)
        if n > int(queue.maximum_message_size):
            _count("sqs_too_long", queue.name)
            return _sqse.InvalidParameterValue("One or more parameters are invalid. Reason: Message must be shorter than %d bytes (this one is %d bytes, body and attributes)." % (int(queue.maximum_message_size), n))
    return None

_send_one = sm.SQSBackend.send_message
def _strict_send(self, queue_name, message_body, message_attributes=None, *args, **kwargs):
    err = _msg_error(self.get_queue(queue_name), message_body, message_attributes)
    if err is not None:
        raise err
    return _send_one(self, queue_name, message_body, message_attributes, *args, **kwargs)
sm.SQSBackend.send_message = _strict_send

_send_batch = sm.SQSBackend.send_message_batch
def _strict_send_batch(self, queue_name, entries):
    queue = self.get_queue(queue_name)
    if _knob("sqs_byte_size", queue=queue.name):
        total = sum(_msg_bytes(e.get("MessageBody", ""), e.get("MessageAttributes")) for e in entries.values())
        if total > 1048576:
            raise _sqse.BatchRequestTooLong(total)
    failed, keep = [], {}
    for k, e in entries.items():
        err = _msg_error(queue, e.get("MessageBody", ""), e.get("MessageAttributes"))
        if err is None:
            keep[k] = e
        else:
            failed.append({"Id": e["Id"], "SenderFault": True, "Code": err.code, "Message": err.message})
    messages, more = _send_batch(self, queue_name, keep) if keep else ([], [])
    return messages, failed + more
sm.SQSBackend.send_message_batch = _strict_send_batch

_redeliver_acc = {}

def _pick_redeliveries(queue, handles):
    share = _knob("sqs_redeliver_share", queue=queue.name)
    if not share or queue.fifo_queue:
        return []
    hs = {h for h in handles if h not in queue.deleted_messages}
    picks = []
    for m in queue._messages:
        if hs.intersection(m.all_receipt_handles):
            acc = _redeliver_acc.get(queue.name, 0.5) + share
            if acc >= 1.0:
                acc -= 1.0
                picks.append(m)
            _redeliver_acc[queue.name] = acc
    return picks

def _redeliver(queue, picks):
    # The copy a server missed: the same message, visible again once the
    # receive's visibility timeout would have run out.
    for m in picks:
        c = sm.Message(m.id, m.body)
        c.message_attributes = _copy.deepcopy(m.message_attributes)
        c.approximate_receive_count = m.approximate_receive_count
        c.approximate_first_receive_timestamp = m.approximate_first_receive_timestamp
        c.mark_sent()
        c.sent_timestamp = m.sent_timestamp
        c.visible_at = max(m.visible_at, unix_time_millis())
        queue.add_message(c)
        _count("sqs_redelivered", queue.name)

_delete_one = sm.SQSBackend.delete_message
def _strict_delete(self, queue_name, receipt_handle):
    queue = self.get_queue(queue_name)
    picks = _pick_redeliveries(queue, [receipt_handle])
    out = _delete_one(self, queue_name, receipt_handle)
    _redeliver(queue, picks)
    return out
sm.SQSBackend.delete_message = _strict_delete

_delete_batch = sm.SQSBackend.delete_message_batch
def _strict_delete_batch(self, queue_name, receipts):
    queue = self.get_queue(queue_name)
    picks = _pick_redeliveries(queue, [r["ReceiptHandle"] for r in receipts])
    out = _delete_batch(self, queue_name, receipts)
    _redeliver(queue, picks)
    return out
sm.SQSBackend.delete_message_batch = _strict_delete_batch
`
