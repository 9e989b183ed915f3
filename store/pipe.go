package store

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// The pipelined group commit (Postgres, an operator's choice: the DSN
// parameter caduceus_pipeline=on, see PipelineParam and docs/scaling.md).
//
// Without it the batcher runs one batch at a time: a group commit is one
// round trip, and the turns that arrive meanwhile wait for it before theirs
// is even sent, so through a distant database the clients fall into two
// groups that alternate. With it, up to pipeDepth batches are in flight at
// once on one connection of the pipe's own, taken from pgx at the protocol
// level (pgconn, hijacked): the batcher writes a batch and goes on to form
// and write the next while a goroutine of the pipe's reads the answers, in
// order, and answers each batch's callers once its own COMMIT answered.
// A batch goes ahead of those in flight only once it holds aheadMin turns
// or has waited aheadWait (hold); otherwise it waits for the pipe to
// drain, taking the turns that arrive meanwhile, so near the database the
// batches stay as large as without the pipe.
//
// Each batch is written as two segments: BEGIN, the checks of the chain
// heads its transactions name (checkHeads), their writes and the heads'
// new values, then a Sync; then COMMIT and a Sync of its own. The server
// runs one connection's messages in order, so a batch's checks run after
// the COMMIT of the batch before it, against the heads that batch wrote:
// the next batch is checked against the heads the batches in flight will
// leave (pipe.proj), not those already committed. When a statement of the
// first segment fails, the server skips to its Sync and the COMMIT of the
// second segment ends the failed transaction as a rollback; a batch behind
// it that names one of its tenants then fails its own check cleanly, and
// every batch that failed so is run again, after the pipe has drained, by
// the batcher's ordinary passes (runPostgres: locked, since its heads are
// forgotten; or in savepoints after a statement failed). A batch whose
// COMMIT was written and whose answer was lost with the connection is
// answered ErrCommitUnknown and never run again; one whose COMMIT was
// known not to have been sent (or whose first segment was answered with
// an error) is run again.
//
// Statements are prepared once per pipe connection (Parse with a name,
// Describe for the parameters' types), then only bound and executed, so
// the server parses none of them again; a new connection prepares them
// again.
//
// Only batches whose every transaction names its tenant (InTxFor) and
// keeps every statement (ExecLater) can be written before the previous
// one has answered: a transaction that reads (ScanRow, Exec, Query) needs
// the answer first. Such a batch, or one with a head not known, or one
// whose transaction failed, waits for the pipe to drain and runs as it
// would without the pipe; its functions run again there, as a
// transaction's function may.

// PipelineParam is the DSN parameter that turns on the pipelined group
// commit (caduceus_pipeline=on); Open removes it from the DSN it hands pgx.
const PipelineParam = "caduceus_pipeline"

// pipeDepth is how many batches may be in flight at once.
const pipeDepth = 4

// A batch is written ahead — while others are in flight — only once it
// holds aheadMin turns, or once it has waited aheadWait for the batches in
// flight to answer; until then it takes the turns that arrive, and it is
// written as soon as the pipe has drained. Near the database a commit
// answers before a batch fills or the wait ends, so the batches stay as
// large as the batcher's without the pipe (a smaller batch is one more
// commit for the same turns: more CPU in the process and the server);
// at a distance, where a commit's round trip is several milliseconds,
// they go ahead. Measured in docs/scaling.md (TestDistanceBench).
const (
	aheadMin  = 8
	aheadWait = 2 * time.Millisecond
)

// pipelineDSN removes PipelineParam from a postgres:// DSN and reports
// whether it asked for the pipe.
func pipelineDSN(dsn string) (string, bool, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn, false, nil // pgx says why
	}
	q := u.Query()
	if !q.Has(PipelineParam) {
		return dsn, false, nil
	}
	v := q.Get(PipelineParam)
	q.Del(PipelineParam)
	u.RawQuery = q.Encode()
	switch v {
	case "on", "true", "1":
		return u.String(), true, nil
	case "off", "false", "0", "":
		return u.String(), false, nil
	}
	return "", false, fmt.Errorf("store: %s=%q: want on or off", PipelineParam, v)
}

// errPipeRead is what a statement that reads (or any but ExecLater) gets in
// a pipelined batch's transaction: the batch cannot be written ahead.
var errPipeRead = errors.New("store: a pipelined batch cannot read")

// pipeNoDB is the execer of a pipelined batch's transaction: every
// statement fails with errPipeRead (ExecLater keeps its statements). Made
// on first use: a *sql.DB starts a goroutine.
var pipeNoDB = sync.OnceValue(func() *sql.DB { return sql.OpenDB(pipeNoConnector{}) })

type pipeNoConnector struct{}

func (pipeNoConnector) Connect(context.Context) (driver.Conn, error) { return nil, errPipeRead }
func (pipeNoConnector) Driver() driver.Driver                        { return pipeNoDriver{} }

type pipeNoDriver struct{}

func (pipeNoDriver) Open(string) (driver.Conn, error) { return nil, errPipeRead }

// pipe is the batcher's pipelined group commit. Its fields not under mu
// are the batcher goroutine's.
type pipe struct {
	b    *batcher
	dsn  string
	c    *pipeConn
	proj auditHeads // the heads the batches in flight will leave

	mu       sync.Mutex
	inflight int
	redo     []*pipeBatch
	note     chan struct{} // a batch was resolved (cap 1)

	// When a batch goes ahead (hold): aheadMin and aheadWait, but for
	// tests; timer is hold's.
	aheadMin  int
	aheadWait time.Duration
	timer     *time.Timer

	// Counters the tests read.
	written    atomic.Int64 // batches written
	overlapped atomic.Int64 // batches written while another was in flight
	committed  atomic.Int64 // batches that committed
	redone     atomic.Int64 // batches run again after the pipe
	prepared   atomic.Int64 // statements prepared
	turns      atomic.Int64 // transactions in the batches written
	aheadFull  atomic.Int64 // batches written ahead holding aheadMin turns
	aheadLate  atomic.Int64 // batches written ahead after waiting aheadWait
	// wrote, when a test sets it, is sent each batch once written; held,
	// the turns a batch holds each time one more joins it in hold.
	wrote chan<- struct{}
	held  chan<- int
}

func newPipe(b *batcher, dsn string) *pipe {
	return &pipe{b: b, dsn: dsn, note: make(chan struct{}, 1), aheadMin: aheadMin, aheadWait: aheadWait}
}

// pipeConn is one pipe connection. Only the batcher goroutine writes to nc
// and touches stmts; the reader goroutine reads nc, in the order of queue.
type pipeConn struct {
	nc    net.Conn
	stmts map[string]*pipeStmt
	m     *pgtype.Map
	wbuf  []byte
	pbuf  []byte
	done  chan struct{} // the reader has returned

	mu    sync.Mutex
	queue []pipeItem
	dead  bool
	wake  chan struct{} // cap 1: queue or dead changed
}

type pipeStmt struct {
	name  string
	oids  []uint32
	err   error
	ready chan struct{} // closed once described (or failed)
	told  bool          // ready is closed (the reader's)
}

// tell closes s.ready once (the reader's).
func (s *pipeStmt) tell(err error) {
	if s.told {
		return
	}
	s.told, s.err = true, err
	close(s.ready)
}

// pipeItem is what the reader reads next: a statement's preparation or a
// batch.
type pipeItem struct {
	prep  []*pipeStmt
	batch *pipeBatch
}

// pipeBatch is one batch written to the pipe.
type pipeBatch struct {
	reqs   []*txReq
	heads  auditHeads // as its commit leaves them
	checks int        // its statements 1..checks are head checks (0 is BEGIN)
	// commitAt is the offset of its COMMIT's Bind in what was written.
	commitAt int
	// Read by the reader: the first segment's first error and the index
	// of its statement; the COMMIT's tag or error.
	failed    error
	failedAt  int
	tag       string
	commitErr error
}

// connect opens a pipe connection: pgconn's startup and authentication,
// then the connection is the pipe's (Hijack).
func (p *pipe) connect() (*pipeConn, error) {
	cfg, err := pgconn.ParseConfig(p.dsn)
	if err != nil {
		return nil, err
	}
	name := "caduceus pipe"
	if app := cfg.RuntimeParams["application_name"]; app != "" {
		name = app + " (pipe)"
	}
	cfg.RuntimeParams["application_name"] = name
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pc, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	hc, err := pc.Hijack()
	if err != nil {
		pc.Close(ctx)
		return nil, err
	}
	c := &pipeConn{nc: hc.Conn, stmts: map[string]*pipeStmt{}, m: pgtype.NewMap(),
		done: make(chan struct{}), wake: make(chan struct{}, 1)}
	go c.read(p)
	return c, nil
}

// run runs batch: written to the pipe when it can be, else (once the pipe
// has drained) as without it.
func (p *pipe) run(batch []*txReq) {
	p.settle()
	// Wait for a slot before the batch is built, and take into it what
	// queued meanwhile: with every slot taken, the turns that arrive
	// share the next commit instead of each waiting for a slot of its
	// own (the pipe's throughput is its depth times its batches' size
	// per round trip).
	if p.full() {
		for p.full() {
			<-p.note
		}
		p.settle()
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-p.b.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
	}
	batch = p.hold(batch)
	// hold may have taken the note of a batch that failed meanwhile: it
	// runs first, as it would have had the batch not waited.
	p.settle()
	pb, msg := p.build(batch)
	if pb == nil {
		p.drain()
		p.settle()
		p.proj = nil
		p.b.runPostgres(batch)
		return
	}
	p.send(pb, msg)
	// send may have taken the note of a batch that failed meanwhile:
	// run it now rather than at the next request.
	p.settle()
}

// hold keeps batch back while batches are in flight, taking the turns
// that arrive meanwhile, until the pipe has drained, the batch holds
// p.aheadMin turns, or it has waited p.aheadWait; it returns the batch to
// write.
func (p *pipe) hold(batch []*txReq) []*txReq {
	if len(batch) >= p.aheadMin || p.idle() {
		return batch
	}
	p.tell(len(batch))
	if p.timer == nil {
		p.timer = time.NewTimer(p.aheadWait)
	} else {
		p.timer.Reset(p.aheadWait)
	}
	defer p.timer.Stop()
	for len(batch) < min(p.aheadMin, maxBatch) {
		select {
		case r := <-p.b.reqs:
			batch = append(batch, r)
			p.tell(len(batch))
		case <-p.note:
			if p.idle() {
				return batch
			}
		case <-p.timer.C:
			return batch
		}
	}
	return batch
}

// tell sends n on held, when a test set it.
func (p *pipe) tell(n int) {
	if p.held != nil {
		select {
		case p.held <- n:
		default:
		}
	}
}

// idle reports whether no batch is in flight.
func (p *pipe) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight == 0
}

// build runs batch's functions against the heads the batches in flight
// will leave and returns it encoded, or nil when it must not be written
// ahead (see the comment at the top).
func (p *pipe) build(batch []*txReq) (*pipeBatch, []byte) {
	for _, r := range batch {
		if r.tenant == "" || r.ctx.Err() != nil {
			return nil, nil
		}
	}
	if p.c != nil && p.c.isDead() {
		p.drain()
		p.settle()
		p.c = nil
		p.proj = nil
	}
	p.mu.Lock()
	if p.inflight == 0 {
		p.proj = nil // every head in flight is now known, or forgotten
	}
	p.mu.Unlock()
	tenants := namedTenants(batch)
	check := make(auditHeads, len(tenants))
	var missing []string
	for _, tenant := range tenants {
		if head, ok := p.proj[tenant]; ok {
			check[tenant] = head
		} else {
			missing = append(missing, tenant)
		}
	}
	if len(missing) > 0 {
		known := p.b.known.cover(namesOnly(missing))
		if known == nil {
			return nil, nil
		}
		for tenant, head := range known {
			check[tenant] = head
		}
	}
	if p.c == nil {
		c, err := p.connect()
		if err != nil {
			return nil, nil
		}
		p.c = c
	}
	heads := auditHeads{}
	t := &Tx{q: pipeNoDB(), dialect: Postgres, db: p.b.db, heads: &heads, shared: true, whole: true, pipe: true,
		later: []laterStmt{{query: "BEGIN"}}}
	checkHeads(t, check)
	for _, r := range batch {
		if err := safe(r.fn)(t); err != nil || t.needConn || t.failed != nil {
			return nil, nil
		}
	}
	if err := heads.write(context.Background(), t); err != nil || t.needConn {
		return nil, nil
	}
	pb := &pipeBatch{reqs: batch, heads: heads, checks: len(check)}
	msg, ok := p.c.encode(p, t.later, &pb.commitAt)
	if !ok {
		return nil, nil
	}
	return pb, msg
}

// namesOnly is a batch naming tenants, for knownHeads.cover.
func namesOnly(tenants []string) []*txReq {
	out := make([]*txReq, len(tenants))
	for i, tenant := range tenants {
		out[i] = &txReq{tenant: tenant}
	}
	return out
}

// encode writes stmts as the first segment (each bound and executed, then
// Sync) and COMMIT as the second, preparing first the statements this
// connection has not prepared. false: it could not (the batch runs
// without the pipe).
func (c *pipeConn) encode(p *pipe, stmts []laterStmt, commitAt *int) ([]byte, bool) {
	var fresh []*pipeStmt
	var err error
	buf := c.wbuf[:0]
	prep := func(query string) {
		if _, ok := c.stmts[query]; ok {
			return
		}
		s := &pipeStmt{name: "caduceus_" + strconv.Itoa(len(c.stmts)+1), ready: make(chan struct{})}
		c.stmts[query] = s
		fresh = append(fresh, s)
		buf, err = (&pgproto3.Parse{Name: s.name, Query: query}).Encode(buf)
		if err == nil {
			buf, err = (&pgproto3.Describe{ObjectType: 'S', Name: s.name}).Encode(buf)
		}
	}
	for _, s := range stmts {
		prep(s.query)
	}
	prep("COMMIT")
	if err != nil {
		c.kill()
		return nil, false
	}
	if len(fresh) > 0 {
		buf, _ = (&pgproto3.Sync{}).Encode(buf)
		if ok, _ := c.push(pipeItem{prep: fresh}, buf); !ok {
			return nil, false
		}
		p.prepared.Add(int64(len(fresh)))
		for _, s := range fresh {
			<-s.ready
		}
		for q, s := range c.stmts {
			if s.err != nil {
				delete(c.stmts, q) // never prepared: prepared again next time
				err = s.err
			}
		}
		if err != nil {
			return nil, false
		}
		buf = buf[:0]
	}
	pbuf := c.pbuf[:0]
	bind := func(query string, args []any) error {
		s := c.stmts[query]
		if len(args) != len(s.oids) {
			return fmt.Errorf("store: %d arguments for %d parameters", len(args), len(s.oids))
		}
		formats := make([]int16, len(args))
		params := make([][]byte, len(args))
		for i, a := range args {
			formats[i] = c.m.FormatCodeForOID(s.oids[i])
			start := len(pbuf)
			nb, err := c.m.Encode(s.oids[i], formats[i], a, pbuf)
			if err != nil {
				return err
			}
			if nb == nil {
				continue // NULL
			}
			pbuf = nb
			params[i] = nb[start:len(nb):len(nb)]
		}
		var err error
		if buf, err = (&pgproto3.Bind{PreparedStatement: s.name, ParameterFormatCodes: formats, Parameters: params}).Encode(buf); err != nil {
			return err
		}
		buf, err = (&pgproto3.Execute{}).Encode(buf)
		return err
	}
	for _, s := range stmts {
		if err := bind(s.query, s.args); err != nil {
			return nil, false
		}
	}
	buf, _ = (&pgproto3.Sync{}).Encode(buf)
	*commitAt = len(buf)
	if err := bind("COMMIT", nil); err != nil {
		return nil, false
	}
	buf, _ = (&pgproto3.Sync{}).Encode(buf)
	c.wbuf, c.pbuf = buf, pbuf[:0]
	return buf, true
}

// send writes pb, once fewer than pipeDepth batches are in flight.
func (p *pipe) send(pb *pipeBatch, msg []byte) {
	for {
		p.mu.Lock()
		if p.inflight < pipeDepth {
			if p.inflight > 0 {
				p.overlapped.Add(1)
				if len(pb.reqs) >= p.aheadMin {
					p.aheadFull.Add(1)
				} else {
					p.aheadLate.Add(1) // hold's wait ended
				}
			}
			p.inflight++
			p.mu.Unlock()
			break
		}
		p.mu.Unlock()
		<-p.note
	}
	p.written.Add(1)
	p.turns.Add(int64(len(pb.reqs)))
	if p.proj == nil {
		p.proj = auditHeads{}
	}
	for tenant, head := range pb.heads {
		head.row = true
		p.proj[tenant] = head
	}
	if ok, n := p.c.push(pipeItem{batch: pb}, msg); !ok {
		// The connection broke: if its COMMIT may have reached the
		// server, whether it committed is not known; if not, the server
		// rolls it back with the connection.
		p.resolve(pb, io.ErrUnexpectedEOF, n > pb.commitAt)
		return
	}
	if p.wrote != nil {
		p.wrote <- struct{}{}
	}
}

// push writes msg and queues item for the reader; false when the
// connection broke before or while it was written (it is then closed),
// with how many bytes of msg were written.
func (c *pipeConn) push(item pipeItem, msg []byte) (bool, int) {
	if c.isDead() {
		return false, 0
	}
	if n, err := c.nc.Write(msg); err != nil {
		c.kill()
		return false, n
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return false, len(msg)
	}
	c.queue = append(c.queue, item)
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true, len(msg)
}

func (c *pipeConn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// kill closes the connection; the reader resolves what it had queued.
func (c *pipeConn) kill() {
	c.mu.Lock()
	c.dead = true
	c.mu.Unlock()
	c.nc.Close()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// read reads the answers to what was queued, in order, until the
// connection breaks or is killed; then it resolves what is left.
func (c *pipeConn) read(p *pipe) {
	defer close(c.done)
	fe := pgproto3.NewFrontend(c.nc, io.Discard)
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			dead := c.dead
			c.mu.Unlock()
			if dead {
				return
			}
			<-c.wake
			continue
		}
		it := c.queue[0]
		c.mu.Unlock()
		var err error
		if it.batch != nil {
			err = readBatch(fe, it.batch)
		} else {
			err = readPrepare(fe, it.prep)
		}
		if err != nil {
			c.kill()
			c.mu.Lock()
			items := c.queue
			c.queue = nil
			c.mu.Unlock()
			for _, it := range items {
				if it.batch != nil {
					p.resolve(it.batch, err, true)
				}
				for _, s := range it.prep {
					s.tell(err)
				}
			}
			return
		}
		c.mu.Lock()
		c.queue = c.queue[1:]
		c.mu.Unlock()
		if it.batch != nil {
			p.resolve(it.batch, nil, false)
		}
	}
}

// readPrepare reads the answers to the Parse and Describe of each of
// stmts, then the Sync's.
func readPrepare(fe *pgproto3.Frontend, stmts []*pipeStmt) error {
	i := 0
	var failed error
	for {
		msg, err := fe.Receive()
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.ParameterDescription:
			if i < len(stmts) {
				stmts[i].oids = append([]uint32(nil), m.ParameterOIDs...)
			}
		case *pgproto3.RowDescription, *pgproto3.NoData:
			if i < len(stmts) {
				stmts[i].tell(nil)
			}
			i++
		case *pgproto3.ErrorResponse:
			failed = pgconn.ErrorResponseToPgError(m)
		case *pgproto3.ReadyForQuery:
			for ; i < len(stmts); i++ {
				stmts[i].tell(cmp.Or(failed, error(errPipeRead)))
			}
			return nil
		}
	}
}

// readBatch reads a batch's answers: its first segment's, then its
// COMMIT's.
func readBatch(fe *pgproto3.Frontend, b *pipeBatch) error {
	done := 0
	for segment := 1; segment <= 2; {
		msg, err := fe.Receive()
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.CommandComplete:
			if segment == 2 {
				b.tag = string(m.CommandTag)
			}
			done++
		case *pgproto3.EmptyQueryResponse:
			done++
		case *pgproto3.ErrorResponse:
			pe := pgconn.ErrorResponseToPgError(m)
			if segment == 2 {
				b.commitErr = pe
			} else if b.failed == nil {
				b.failed, b.failedAt = pe, done
			}
		case *pgproto3.ReadyForQuery:
			segment++
		}
	}
	return nil
}

// resolve ends pb: ioErr is the connection's failure (nil: its answers
// were read); written says whether its COMMIT may have been sent.
func (p *pipe) resolve(pb *pipeBatch, ioErr error, written bool) {
	b := p.b
	switch {
	case pb.failed != nil:
		// Its first segment failed: the server rolled it back.
		b.known.forget(pb.reqs, pb.heads)
		p.mu.Lock()
		p.redo = append(p.redo, pb)
		p.mu.Unlock()
	case ioErr != nil && written:
		b.known.forget(pb.reqs, pb.heads)
		answer(pb.reqs, fmt.Errorf("store: commit: %w", fmt.Errorf("%w: %w", ErrCommitUnknown, ioErr)))
	case ioErr != nil:
		b.known.forget(pb.reqs, pb.heads)
		p.mu.Lock()
		p.redo = append(p.redo, pb)
		p.mu.Unlock()
	case pb.commitErr != nil || pb.tag != "COMMIT":
		b.known.forget(pb.reqs, pb.heads)
		answer(pb.reqs, fmt.Errorf("store: commit: %w", cmp.Or(pb.commitErr, pgx.ErrTxCommitRollback)))
	default:
		b.known.remember(pb.heads)
		p.committed.Add(1)
		answer(pb.reqs, nil)
	}
	p.mu.Lock()
	p.inflight--
	p.mu.Unlock()
	select {
	case p.note <- struct{}{}:
	default:
	}
}

// full reports whether pipeDepth batches are in flight.
func (p *pipe) full() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight >= pipeDepth
}

// drain waits until no batch is in flight.
func (p *pipe) drain() {
	for {
		p.mu.Lock()
		n := p.inflight
		p.mu.Unlock()
		if n == 0 {
			return
		}
		<-p.note
	}
}

// settle runs again, once the pipe has drained, the batches that failed in
// it, in the order they were written.
func (p *pipe) settle() {
	p.mu.Lock()
	n := len(p.redo)
	p.mu.Unlock()
	if n == 0 {
		return
	}
	p.drain()
	p.mu.Lock()
	redo := p.redo
	p.redo = nil
	p.mu.Unlock()
	p.proj = nil
	for _, pb := range redo {
		p.redone.Add(1)
		if pb.failed != nil && !(pb.failedAt >= 1 && pb.failedAt <= pb.checks && headMovedError(pb.failed)) {
			// A statement of its own failed: in savepoints, as
			// runPostgres runs a batch whose first pass failed.
			p.b.wholeFails.Add(1)
			if len(pb.reqs) == 1 {
				r := pb.reqs[0]
				r.done <- p.b.db.inTxRetried(context.WithoutCancel(r.ctx), headFirst(r.tenant, r.fn))
				continue
			}
			p.b.runSaved(pb.reqs)
			continue
		}
		if pb.failed != nil {
			p.b.headsMoved.Add(1)
		}
		p.b.runPostgres(pb.reqs)
	}
}

// close drains the pipe, runs again what failed in it, and closes its
// connection.
func (p *pipe) close() {
	p.drain()
	p.settle()
	if p.c != nil {
		p.c.nc.Write([]byte{'X', 0, 0, 0, 4}) // Terminate
		p.c.kill()
		<-p.c.done
		p.c = nil
	}
}
