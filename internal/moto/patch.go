package moto

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// patchesBase is moto_server with its hot spots made cheap, giving the same
// answers. Stock moto 5.2.5 computes every attribute of a queue, including
// the approximate message counts (a scan of all its messages with two
// datetime conversions per message), for every message it sends and
// receives: O(queue length) per message, so a queue of N messages costs
// O(N^2). AWS has no such cost, and it made the emulated stack (`make
// emulated`, the tests, the benchmark) measure moto's queue rather than
// the downloader.
//
// The patches replace moto's unix_time (utcnow minus the epoch, as
// datetimes) with time.time(), which is the same number, the retention
// check on receive with a read of the one attribute it needs, the message
// counts with 0 while a message is being sent (sending reads one other
// attribute), and a batch delete's two scans of the queue per entry with
// one scan.
//
// DynamoDB's Query has the same shape of problem: every query, on the table
// or on an index, first sorts all the table's items (Python comparisons of
// wrapped values) and then filters them; the patch hands Query the items
// unsorted (its results are sorted afterwards anyway).
//
// Every request, last, finds its service under one global lock by listing
// moto's package directory (a stat per entry) and trying up to hundreds of
// URL patterns: the patch remembers each host's answer, which never
// changes. And werkzeug's log line per request (a large share of moto's
// time under load) is turned off.
//
// DynamoDB's operations, last, run one at a time (one lock in the server):
// moto makes neither a conditional write nor an update's actions atomic,
// and the client-side lock of atomic.go covers one process only, not the
// Lambda binaries under aws-lambda-rie, whose bucket adds (three
// list_appends in one UpdateItem) from many workers at once came out as
// lists of different lengths.
//
// TestPatches checks the answers; a moto upgrade that moves these internals
// makes the server fail at start, loudly, rather than run unpatched.
const patchesBase = `import sys, time, threading, logging, collections
logging.getLogger("werkzeug").setLevel(logging.WARNING)
import moto.dynamodb.models.table as dt
_tls = threading.local()
_all_items = dt.Table.all_items
def all_items(self):
    if not getattr(_tls, "query", False):
        return _all_items(self)
    out = []
    for hs in self.items.values():
        if self.range_key_attr:
            out.extend(hs.values())
        else:
            out.append(hs)
    return out
_query = dt.Table.query
def query(self, *args, **kwargs):
    _tls.query = True
    try:
        return _query(self, *args, **kwargs)
    finally:
        _tls.query = False
dt.Table.all_items, dt.Table.query = all_items, query
import moto.core.utils as cu
_unix_time = cu.unix_time
def unix_time(dt=None):
    return time.time() if dt is None else _unix_time(dt)
def unix_time_millis(dt=None):
    return unix_time(dt) * 1000.0
import moto.sqs.models as sm
sm.unix_time, sm.unix_time_millis = unix_time, unix_time_millis
def _retained(self, queue_name, message):
    q = self.get_queue(queue_name)
    return int(q.message_retention_period) + message.sent_timestamp / 1000 > time.time()
sm.SQSBackend.is_message_valid_based_on_retention_period = _retained
# Sending reads the queue's attributes for one flag; the message counts in
# them (three scans of the queue) are not used there.
_sending = threading.local()
def _cheap_when_sending(prop):
    def fget(self):
        return 0 if getattr(_sending, "on", False) else prop.fget(self)
    return property(fget)
for _name in ("approximate_number_of_messages", "approximate_number_of_messages_delayed", "approximate_number_of_messages_not_visible"):
    setattr(sm.Queue, _name, _cheap_when_sending(getattr(sm.Queue, _name)))
_send_message = sm.SQSBackend.send_message
def send_message(self, *args, **kwargs):
    _sending.on = True
    try:
        return _send_message(self, *args, **kwargs)
    finally:
        _sending.on = False
sm.SQSBackend.send_message = send_message
# A batch delete scans the queue once, not twice per entry.
def delete_message_batch(self, queue_name, receipts):
    queue = self.get_queue(queue_name)
    handles = {r["ReceiptHandle"] for r in receipts} - set(queue.deleted_messages)
    matched = set()
    if handles:
        keep = []
        for m in queue._messages:
            hit = handles.intersection(m.all_receipt_handles)
            if hit:
                matched |= hit
                queue.pending_messages.discard(m)
                queue.deleted_messages.update(m.all_receipt_handles)
            else:
                keep.append(m)
        queue._messages = keep
    success, errors = [], []
    for r in receipts:
        h = r["ReceiptHandle"]
        if h in matched or h in queue.deleted_messages:
            success.append(r["Id"])
        else:
            errors.append({"Id": r["Id"], "SenderFault": True, "Code": "ReceiptHandleIsInvalid",
                           "Message": f'The input receipt handle "{h}" is not a valid receipt handle.'})
    return success, errors
sm.SQSBackend.delete_message_batch = delete_message_batch
# Every request looks its service up under one global lock: a listing of
# moto's package directory with a stat per entry, then up to hundreds of
# URL patterns. A host's answer never changes; remember it.
import moto.moto_server.werkzeug_app as wa
_backend_for_host = wa.DomainDispatcherApplication.get_backend_for_host
_hosts = {}
def get_backend_for_host(self, host):
    b = _hosts.get(host)
    if b is None:
        b = _backend_for_host(self, host)
        if b is not None:
            _hosts[host] = b
    return b
wa.DomainDispatcherApplication.get_backend_for_host = get_backend_for_host
# DynamoDB's operations one at a time: moto reads an item, evaluates the
# condition and stores the result in separate steps, and an update applies
# its actions one after another on the stored item, so concurrent requests
# from separate processes (atomic.go covers one client process only) lose
# updates, and a read can see an update half applied.
import moto.dynamodb.models as dm
_dynamo_lock = threading.RLock()
def _one_at_a_time(f):
    def g(*args, **kwargs):
        with _dynamo_lock:
            return f(*args, **kwargs)
    return g
for _name in ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item", "get_item", "batch_get_item", "query", "scan"):
    setattr(dm.DynamoDBBackend, _name, _one_at_a_time(getattr(dm.DynamoDBBackend, _name)))
`

// patchesMain starts the server, after the patches and the strict layer.
const patchesMain = `
from moto.server import main
sys.argv[0] = "moto_server"
sys.exit(main())
`

// patches is the whole script: the speed and atomicity patches above, the
// strict layer (strict.go), then the server.
var patches = patchesBase + strictPatch + patchesMain

// patchedCommand returns the command line that runs the moto_server
// console script at server with the patches: the Python from its #! line
// and the patch script, kept in the temporary directory under a name that
// holds a hash of both (written once, atomically, so concurrent starts
// share it and nothing needs cleaning up). The script's name contains
// "moto_server", as process listings that look for the server expect.
func patchedCommand(server string) ([]string, error) {
	python, err := interpreter(server)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(python + "\x00" + patches))
	dir := filepath.Join(os.TempDir(), "urldownloader-moto")
	path := filepath.Join(dir, "moto_server_patched_"+hex.EncodeToString(sum[:6])+".py")
	if b, err := os.ReadFile(path); err == nil && string(b) == patches {
		return []string{python, path}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("moto patches: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "write-*")
	if err != nil {
		return nil, fmt.Errorf("moto patches: %w", err)
	}
	_, werr := tmp.WriteString(patches)
	cerr := tmp.Close()
	if werr == nil && cerr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("moto patches: write %s: %w", path, errors.Join(werr, cerr))
	}
	return []string{python, path}, nil
}

// interpreter reads the Python that runs a console script from its #! line.
func interpreter(script string) (string, error) {
	f, err := os.Open(script)
	if err != nil {
		return "", fmt.Errorf("moto patches: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "#!") {
		return "", fmt.Errorf("moto patches: %s is not a Python console script (no #! line); point %s at moto_server from `make tools`, or start with Options{Stock: true}", script, EnvServer)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "#!")), nil
}
