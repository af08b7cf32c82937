// A charge worker on amqp091-go run as a process group: a master that holds the HTTP port and two
// worker processes it starts, all sharing one SQLite inbox written in the job's transaction.
//
// Choices: the dedup key is the Idempotency-Key header; the key row and the charge are inserted in
// one BEGIN IMMEDIATE transaction (the key is claimed by the write lock for the whole job, and a
// crash rolls both back); each worker takes two messages at a time (prefetch 2) and works them
// one after another; a failed job is requeued, and dead-lettered at its third delivery; no events
// feed; the master serves GET /effects?key=K and /health once every worker consumes.  Test hooks
// (first delivery only, ":every" for every delivery): X-Test-Pause: before-work:MS,
// X-Test-Fault: before-work|after-work.
//
// Flaw: ack-before-work acks each message as it arrives.
//
// Run: consumer --amqp-url URL --queue Q --dlq DLQ --db FILE --port PORT [--flaw ack-before-work]
package main

import (
	"bufio"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/mattn/go-sqlite3"
	amqp "github.com/rabbitmq/amqp091-go"
)

const workers = 2
const maxAttempts = 3

var (
	amqpURL = flag.String("amqp-url", "", "the broker")
	queue   = flag.String("queue", "", "the queue")
	dlq     = flag.String("dlq", "", "the dead-letter queue")
	dbPath  = flag.String("db", "", "the SQLite file")
	port    = flag.Int("port", 0, "the master's HTTP port")
	flaw    = flag.String("flaw", "", "ack-before-work")
	worker  = flag.Bool("worker", false, "run as a worker (the master starts these)")
)

func openDB() *sql.DB {
	db, err := sql.Open("sqlite3", "file:"+*dbPath+"?_txlock=immediate&_busy_timeout=60000")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	_, err = db.Exec(`create table if not exists inbox (key text primary key, done_at real not null);
		create table if not exists charges (id text primary key, idempotency_key text not null,
		                                    amount integer not null)`)
	if err != nil {
		log.Fatal(err)
	}
	return db
}

func main() {
	flag.Parse()
	if *flaw != "" && *flaw != "ack-before-work" {
		fmt.Fprintln(os.Stderr, "--flaw must be ack-before-work")
		os.Exit(2)
	}
	if *worker {
		runWorker()
		return
	}
	runMaster()
}

// runMaster starts the workers in its own process group, waits until each says it consumes, and
// serves the port; SIGTERM is passed on to the workers.
func runMaster() {
	db := openDB()
	var children []*exec.Cmd
	ready := make(chan struct{}, workers)
	for i := 0; i < workers; i++ {
		cmd := exec.Command(os.Args[0], append(os.Args[1:], "--worker")...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			log.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		go func() {
			lines := bufio.NewScanner(out)
			for lines.Scan() {
				if lines.Text() == "consuming" {
					ready <- struct{}{}
				}
			}
		}()
		children = append(children, cmd)
	}
	for i := 0; i < workers; i++ {
		<-ready
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		for _, child := range children {
			child.Process.Signal(syscall.SIGTERM)
		}
		for _, child := range children {
			child.Wait()
		}
		os.Exit(0)
	}()
	died := make(chan error, workers)
	for _, child := range children {
		go func(c *exec.Cmd) { died <- c.Wait() }(child)
	}
	go func() {
		err := <-died
		log.Printf("a worker exited (%v): stopping", err)
		for _, child := range children {
			child.Process.Kill()
		}
		os.Exit(1)
	}()
	http.HandleFunc("/effects", func(w http.ResponseWriter, r *http.Request) {
		var count int
		db.QueryRow("select count(*) from charges where idempotency_key = ?",
			r.URL.Query().Get("key")).Scan(&count)
		json.NewEncoder(w).Encode(map[string]int{"count": count})
	})
	http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	log.Fatal(http.ListenAndServe(fmt.Sprintf("127.0.0.1:%d", *port), nil))
}

type poison string

func runWorker() {
	db := openDB()
	var stopping sync.Once
	quit := make(chan struct{})
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-signals; stopping.Do(func() { close(quit) }) }()
	announced := false
	for {
		select {
		case <-quit:
			return
		default:
		}
		conn, err := amqp.DialConfig(*amqpURL, amqp.Config{Heartbeat: 2 * time.Second})
		if err != nil {
			time.Sleep(300 * time.Millisecond)
			continue
		}
		if err := consume(conn, db, quit, &announced); err != nil {
			log.Printf("connection lost: %v", err)
		}
		conn.Close()
	}
}

func consume(conn *amqp.Connection, db *sql.DB, quit chan struct{}, announced *bool) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(*dlq, true, false, false, false,
		amqp.Table{"x-queue-type": "quorum"}); err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(*queue, true, false, false, false, amqp.Table{
		"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": *dlq,
	}); err != nil {
		return err
	}
	if err := ch.Qos(2, 0, false); err != nil {
		return err
	}
	deliveries, err := ch.Consume(*queue, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	if !*announced {
		fmt.Println("consuming")
		*announced = true
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	for {
		select {
		case <-quit:
			ch.Close()
			return nil
		case err := <-closed:
			return err
		case d, ok := <-deliveries:
			if !ok {
				return fmt.Errorf("deliveries closed")
			}
			handle(db, d)
		}
	}
}

func header(d amqp.Delivery, name string) string {
	for k, v := range d.Headers {
		if strings.EqualFold(k, name) {
			switch s := v.(type) {
			case string:
				return s
			case []byte:
				return string(s)
			}
		}
	}
	return ""
}

func hook(d amqp.Delivery, name string, first bool) string {
	value := header(d, name)
	if strings.HasSuffix(value, ":every") {
		return strings.TrimSuffix(value, ":every")
	}
	if first {
		return value
	}
	return ""
}

func handle(db *sql.DB, d amqp.Delivery) {
	attempts, _ := d.Headers["x-delivery-count"].(int64)
	first := !d.Redelivered && attempts == 0
	if *flaw == "ack-before-work" {
		d.Ack(false)
	}
	key := header(d, "Idempotency-Key")
	var charge struct {
		Amount json.Number `json:"amount"`
	}
	decoder := json.NewDecoder(strings.NewReader(string(d.Body)))
	decoder.UseNumber()
	amount, err := int64(0), decoder.Decode(&charge)
	if err == nil {
		amount, err = strconv.ParseInt(string(charge.Amount), 10, 64)
	}
	if key == "" || err != nil || amount < 1 {
		if *flaw != "ack-before-work" {
			d.Reject(false) // poison: into the dead-letter queue
		}
		return
	}
	if err := work(db, key, amount, hook(d, "X-Test-Pause", first), hook(d, "X-Test-Fault", first)); err != nil {
		if *flaw == "ack-before-work" {
			return
		}
		time.Sleep(200 * time.Millisecond)
		if attempts+1 >= maxAttempts {
			d.Reject(false)
		} else {
			d.Nack(false, true)
		}
		return
	}
	if *flaw != "ack-before-work" {
		d.Ack(false)
	}
}

func work(db *sql.DB, key string, amount int64, pause, fault string) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	done, err := tx.Exec("insert into inbox values (?, ?) on conflict do nothing", key,
		float64(time.Now().UnixNano())/1e9)
	if err != nil {
		return err
	}
	if rows, _ := done.RowsAffected(); rows == 0 {
		return nil // a duplicate: the key was done before
	}
	if ms, ok := strings.CutPrefix(pause, "before-work:"); ok {
		millis, _ := strconv.Atoi(ms)
		time.Sleep(time.Duration(millis) * time.Millisecond)
	}
	if fault == "before-work" {
		return fmt.Errorf("X-Test-Fault: before-work")
	}
	id := make([]byte, 8)
	rand.Read(id)
	if _, err := tx.Exec("insert into charges values (?, ?, ?)", "ch_"+hex.EncodeToString(id),
		key, amount); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if fault == "after-work" {
		return fmt.Errorf("X-Test-Fault: after-work")
	}
	return nil
}
