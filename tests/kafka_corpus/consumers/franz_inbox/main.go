// A charge worker on franz-go (kgo) with an inbox table in SQLite written in the job's transaction.
//
// Choices: the dedup key is the record's own key; the inbox row and the charge are inserted in one
// BEGIN IMMEDIATE transaction (the key is claimed by the write lock for the whole job, and a crash
// rolls both back); autocommit is off (kgo.DisableAutoCommit) and each record is committed with
// CommitRecords once its transaction committed; records are polled one at a time; a failed job is
// read again (SetOffsets back to it) and goes to the dead-letter topic at its third delivery in
// this process; a poison record (no key, not a charge) goes to the dead-letter topic at once; an
// events feed and GET /effects?key=K on --port.  Test hooks (record headers): X-Test-Pause:
// before-work:MS or before-commit:MS, X-Test-Fault: before-work|after-work.
//
// Flaws: mark-before-work marks each record for commit as it is polled (kgo.AutoCommitMarks with
// MarkCommitRecords before the job: the marks are committed every 100 ms, while the job runs);
// dedup-on-offset keys the inbox on the record's topic, partition and offset.
//
// Run: consumer --bootstrap HOST:PORT --topic T --group G --dlt T.dead --db FILE --port PORT
//      [--session-timeout-ms N] [--max-poll-interval-ms N] [--flaw F]
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/mattn/go-sqlite3"
	"github.com/twmb/franz-go/pkg/kgo"
)

const maxDeliveries = 3

var (
	bootstrap   = flag.String("bootstrap", "", "the broker's bootstrap address")
	topic       = flag.String("topic", "", "the topic")
	group       = flag.String("group", "", "the consumer group")
	dlt         = flag.String("dlt", "", "the dead-letter topic")
	dbPath      = flag.String("db", "", "the SQLite file")
	port        = flag.Int("port", 0, "the HTTP port")
	sessionMs   = flag.Int("session-timeout-ms", 10000, "the group session timeout")
	maxPollMs   = flag.Int("max-poll-interval-ms", 300000, "the rebalance timeout")
	flaw        = flag.String("flaw", "", "mark-before-work or dedup-on-offset")
	events      []map[string]any
	eventsLock  sync.Mutex
	servingOnce sync.Once
)

func record(kind, key string, fields map[string]any) {
	eventsLock.Lock()
	defer eventsLock.Unlock()
	event := map[string]any{"index": len(events), "type": kind, "pid": os.Getpid(),
		"time": float64(time.Now().UnixNano()) / 1e9}
	if key != "" {
		event["key"] = key
	} else {
		event["key"] = nil
	}
	for name, value := range fields {
		event[name] = value
	}
	events = append(events, event)
}

func header(r *kgo.Record, name string) string {
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, name) {
			return string(h.Value)
		}
	}
	return ""
}

type worker struct {
	client     *kgo.Client
	db         *sql.DB
	deliveries map[string]int
}

func (w *worker) handle(ctx context.Context, r *kgo.Record) {
	key := string(r.Key)
	place := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
	earlier := w.deliveries[place]
	w.deliveries[place] = earlier + 1
	record("deliver", key, map[string]any{"partition": r.Partition, "offset": r.Offset,
		"redelivered": earlier > 0})
	if *flaw == "mark-before-work" {
		w.client.MarkCommitRecords(r)
	}
	var charge struct {
		Amount json.Number `json:"amount"`
	}
	amount, err := int64(0), json.Unmarshal(r.Value, &charge)
	if err == nil {
		amount, err = charge.Amount.Int64()
	}
	if key == "" || err != nil || amount < 1 {
		record("poison", key, map[string]any{"reason": "not a charge, or no key"})
		w.deadLetter(ctx, r, key, "not a charge, or no key")
		return
	}
	pause, fault := "", ""
	if earlier == 0 {
		pause, fault = header(r, "X-Test-Pause"), header(r, "X-Test-Fault")
	}
	dedup := key
	if *flaw == "dedup-on-offset" {
		dedup = fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)
	}
	outcome, err := w.work(key, dedup, amount, pause, fault)
	if err != nil {
		record("work-failed", key, map[string]any{"reason": err.Error(), "attempt": earlier + 1})
		if earlier+1 >= maxDeliveries {
			w.deadLetter(ctx, r, key, fmt.Sprintf("%v (delivery %d)", err, earlier+1))
			return
		}
		time.Sleep(100 * time.Millisecond)
		w.client.SetOffsets(map[string]map[int32]kgo.EpochOffset{
			r.Topic: {r.Partition: {Epoch: -1, Offset: r.Offset}}})
		record("nack", key, map[string]any{"reason": err.Error()})
		return
	}
	hook(key, pause, "before-commit")
	w.commit(ctx, r, key, outcome)
}

func (w *worker) work(key, dedup string, amount int64, pause, fault string) (string, error) {
	tx, err := w.db.Begin()
	if err != nil {
		return "", err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after the commit
	res, err := tx.Exec("insert into inbox values (?, ?) on conflict do nothing", dedup,
		float64(time.Now().Unix()))
	if err != nil {
		return "", err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return "duplicate", nil
	}
	record("claim", key, nil)
	hook(key, pause, "before-work")
	if fault == "before-work" {
		return "", errors.New("X-Test-Fault: before-work")
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	if _, err := tx.Exec("insert into charges values (?, ?, ?)", "ch_"+hex.EncodeToString(id),
		key, amount); err != nil {
		return "", err
	}
	if err := tx.Commit(); err != nil {
		return "", err
	}
	record("commit", key, nil)
	if fault == "after-work" {
		return "", errors.New("X-Test-Fault: after-work")
	}
	return "done", nil
}

func hook(key, pause, point string) {
	if ms, found := strings.CutPrefix(pause, point+":"); found {
		millis, _ := strconv.Atoi(ms)
		record("pause", key, map[string]any{"point": point, "seconds": float64(millis) / 1000})
		time.Sleep(time.Duration(millis) * time.Millisecond)
	}
}

func (w *worker) commit(ctx context.Context, r *kgo.Record, key, outcome string) {
	if *flaw == "mark-before-work" {
		record("processed", key, map[string]any{"outcome": outcome})
		return
	}
	if err := w.client.CommitRecords(ctx, r); err != nil {
		record("ack-lost", key, map[string]any{"reason": err.Error()})
		return
	}
	record("offset-commit", key, map[string]any{"outcome": outcome, "offset": r.Offset})
}

func (w *worker) deadLetter(ctx context.Context, r *kgo.Record, key, reason string) {
	letter := &kgo.Record{Topic: *dlt, Key: r.Key, Value: r.Value,
		Headers: append(append([]kgo.RecordHeader{}, r.Headers...),
			kgo.RecordHeader{Key: "x-dead-letter-reason", Value: []byte(reason)})}
	if err := w.client.ProduceSync(ctx, letter).FirstErr(); err != nil {
		record("work-failed", key, map[string]any{"reason": "the dead-letter topic: " + err.Error()})
		return
	}
	record("dead-letter", key, map[string]any{"topic": *dlt, "reason": reason})
	w.commit(ctx, r, key, "dead-lettered")
}

func serve(db *sql.DB) {
	http.HandleFunc("/events", func(rw http.ResponseWriter, req *http.Request) {
		after, _ := strconv.Atoi(req.URL.Query().Get("after"))
		eventsLock.Lock()
		items := []map[string]any{}
		if after < len(events) {
			items = append(items, events[after:]...)
		}
		eventsLock.Unlock()
		_ = json.NewEncoder(rw).Encode(map[string]any{"events": items, "next": after + len(items)})
	})
	http.HandleFunc("/effects", func(rw http.ResponseWriter, req *http.Request) {
		var count int
		err := db.QueryRow("select count(*) from charges where idempotency_key = ?",
			req.URL.Query().Get("key")).Scan(&count)
		if err != nil {
			http.Error(rw, err.Error(), 500)
			return
		}
		_ = json.NewEncoder(rw).Encode(map[string]any{"count": count})
	})
	http.HandleFunc("/health", func(rw http.ResponseWriter, req *http.Request) {
		_ = json.NewEncoder(rw).Encode(map[string]any{"ok": true})
	})
	go func() { log.Fatal(http.ListenAndServe(fmt.Sprintf("127.0.0.1:%d", *port), nil)) }()
}

func main() {
	flag.Parse()
	if *flaw != "" && *flaw != "mark-before-work" && *flaw != "dedup-on-offset" {
		fmt.Fprintln(os.Stderr, "--flaw must be mark-before-work or dedup-on-offset")
		os.Exit(2)
	}
	db, err := sql.Open("sqlite3", "file:"+*dbPath+"?_txlock=immediate&_busy_timeout=30000")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`create table if not exists inbox (key text primary key, done_at real not null);
		create table if not exists charges (id text primary key, idempotency_key text not null,
		                                    amount integer not null)`); err != nil {
		log.Fatal(err)
	}
	session := time.Duration(*sessionMs) * time.Millisecond
	opts := []kgo.Opt{
		kgo.SeedBrokers(*bootstrap), kgo.ConsumerGroup(*group), kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(session), kgo.HeartbeatInterval(max(100*time.Millisecond, session/3)),
		kgo.RebalanceTimeout(time.Duration(*maxPollMs) * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, got map[string][]int32) {
			record("assigned", "", map[string]any{"partitions": got[*topic]})
			servingOnce.Do(func() { serve(db) })
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			record("revoked", "", map[string]any{"partitions": lost[*topic]})
		}),
	}
	if *flaw == "mark-before-work" {
		opts = append(opts, kgo.AutoCommitMarks(), kgo.AutoCommitInterval(100*time.Millisecond))
	} else {
		opts = append(opts, kgo.DisableAutoCommit())
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	w := &worker{client: client, db: db, deliveries: map[string]int{}}
	for ctx.Err() == nil {
		fetches := client.PollRecords(ctx, 1)
		if fetches.IsClientClosed() {
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				log.Printf("fetch error on %s/%d: %v", t, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) { w.handle(ctx, r) })
	}
	client.Close()
}
