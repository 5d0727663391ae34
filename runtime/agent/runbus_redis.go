package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisBus is the RunBus over Redis. Every key and channel starts with
// prefix:
//
//	<prefix>run:<run_id>:events   a Redis Stream of the run's events; entry
//	                              ids are <event id>-0, so XREAD from a
//	                              Last-Event-ID resumes exactly there;
//	                              fields e (event) and d (data); the end is
//	                              an entry with field end
//	<prefix>run:<run_id>:attempt  the attempt allowed to write the stream
//	<prefix>cancel                channel: {"run","action"} cancellations
//	<prefix>wakeups               a list of thread ids with a run to claim:
//	                              LPUSH by the replica that admitted the
//	                              run, BRPOP by one idle worker
//
// A stream is capped at streamMaxLen entries (XADD MAXLEN ~) and expires
// streamLive after its last write while the run goes on, streamKept after
// its end. The wake-up list keeps its newest wakeMaxLen entries and
// expires wakeKept after its last push (no worker is taking them): a
// wake-up dropped either way is a run the workers' poll finds.
type redisBus struct {
	rdb    *redis.Client
	prefix string
}

const (
	streamMaxLen = 10000
	streamLive   = 24 * time.Hour
	streamKept   = 10 * time.Minute
	wakeMaxLen   = 100000
	wakeKept     = 10 * time.Minute
)

// OpenRedisBus connects to the Redis url names (redis:// or rediss://)
// with every key and channel under prefix, for Engine.Bus. Errors never
// quote url, which holds a password.
func OpenRedisBus(ctx context.Context, url, prefix string) (RunBus, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, errors.New("the agent's Redis URL does not parse (redis://user:password@host:port/db)")
	}
	// A stream reader holds a connection while it blocks: room for many
	// clients streaming at once from one replica.
	opt.PoolSize = 512
	rdb := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("connect to the agent's Redis: %w", redactRedis(err))
	}
	return &redisBus{rdb: rdb, prefix: prefix}, nil
}

// redactRedis keeps a Redis error's kind (the server's reply) without a
// network error's text, which names the host.
func redactRedis(err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		return errors.New(re.Error())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errors.New("cannot reach the server")
}

func (b *redisBus) events(run string) string  { return b.prefix + "run:" + run + ":events" }
func (b *redisBus) attempt(run string) string { return b.prefix + "run:" + run + ":attempt" }

var busBegin = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #last == 0 then return '0-0' end
return last[1][1]
`)

// busAppend appends id/event/data triples if ARGV[1] is the stream's
// writer (0 otherwise); the script runs atomically, so a Begin of a newer
// attempt comes wholly before or after it.
var busAppend = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
for i = 4, #ARGV, 3 do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], ARGV[i] .. '-0', 'e', ARGV[i+1], 'd', ARGV[i+2])
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// busEnd ends the stream (ARGV[1] "0": whoever ends a run that never
// started); the end entry's id is the server's clock, above every event.
var busEnd = redis.NewScript(`
if ARGV[1] ~= '0' and redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('XADD', KEYS[2], '*', 'end', '1')
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], 'ended', 'PX', ARGV[2])
return 1
`)

func (b *redisBus) Begin(ctx context.Context, run string, attempt int) (int, error) {
	last, err := busBegin.Run(ctx, b.rdb, []string{b.attempt(run), b.events(run)}, attempt, streamLive.Milliseconds()).Text()
	if err != nil {
		return 0, fmt.Errorf("begin the run's stream: %w", redactRedis(err))
	}
	ms, _, _ := strings.Cut(last, "-")
	n, err := strconv.Atoi(ms)
	if err != nil {
		return 0, fmt.Errorf("begin the run's stream: entry id %q", last)
	}
	return n, nil
}

func (b *redisBus) Append(ctx context.Context, run string, attempt int, evs []StreamEvent) error {
	args := make([]any, 0, 3+3*len(evs))
	args = append(args, attempt, streamMaxLen, streamLive.Milliseconds())
	for _, ev := range evs {
		args = append(args, ev.ID, ev.Event, []byte(ev.Data))
	}
	ok, err := busAppend.Run(ctx, b.rdb, []string{b.attempt(run), b.events(run)}, args...).Int()
	if err != nil {
		return fmt.Errorf("append to the run's stream: %w", redactRedis(err))
	}
	if ok == 0 {
		return errBusFenced
	}
	return nil
}

func (b *redisBus) End(ctx context.Context, run string, attempt int) error {
	ok, err := busEnd.Run(ctx, b.rdb, []string{b.attempt(run), b.events(run)}, attempt, streamKept.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("end the run's stream: %w", redactRedis(err))
	}
	if ok == 0 {
		return errBusFenced
	}
	return nil
}

func (b *redisBus) Read(ctx context.Context, run string, after int, block time.Duration) ([]StreamEvent, bool, error) {
	res, err := b.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{b.events(run), strconv.Itoa(after) + "-0"}, Count: 1000, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the run's stream: %w", redactRedis(err))
	}
	var out []StreamEvent
	for _, st := range res {
		for _, m := range st.Messages {
			if _, ok := m.Values["end"]; ok {
				return out, true, nil
			}
			ms, _, _ := strings.Cut(m.ID, "-")
			id, err := strconv.Atoi(ms)
			if err != nil {
				continue
			}
			ev, _ := m.Values["e"].(string)
			data, _ := m.Values["d"].(string)
			out = append(out, StreamEvent{ID: id, Event: ev, Data: json.RawMessage(data)})
		}
	}
	return out, false, nil
}

func (b *redisBus) Exists(ctx context.Context, run string) (bool, error) {
	n, err := b.rdb.Exists(ctx, b.events(run)).Result()
	if err != nil {
		return false, fmt.Errorf("look for the run's stream: %w", redactRedis(err))
	}
	return n > 0, nil
}

type busCancelMsg struct {
	Run    string `json:"run"`
	Action string `json:"action"`
}

func (b *redisBus) Cancel(ctx context.Context, run, action string) error {
	raw, _ := json.Marshal(busCancelMsg{Run: run, Action: action})
	if err := b.rdb.Publish(ctx, b.prefix+"cancel", raw).Err(); err != nil {
		return fmt.Errorf("publish a cancellation: %w", redactRedis(err))
	}
	return nil
}

func (b *redisBus) wakeups() string { return b.prefix + "wakeups" }

func (b *redisBus) Wake(ctx context.Context, thread string) error {
	// One round trip: the push, the cap and the expiry in a MULTI.
	_, err := b.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.LPush(ctx, b.wakeups(), thread)
		p.LTrim(ctx, b.wakeups(), 0, wakeMaxLen-1)
		p.PExpire(ctx, b.wakeups(), wakeKept)
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue a wake-up: %w", redactRedis(err))
	}
	return nil
}

func (b *redisBus) TakeWake(ctx context.Context, block time.Duration) (string, error) {
	res, err := b.rdb.BRPop(ctx, block, b.wakeups()).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("take a wake-up: %w", redactRedis(err))
	}
	if len(res) != 2 {
		return "", fmt.Errorf("take a wake-up: BRPOP answered %d values", len(res))
	}
	return res[1], nil
}

func (b *redisBus) Listen(ctx context.Context, onCancel func(run, action string)) error {
	ps := b.rdb.Subscribe(ctx, b.prefix+"cancel")
	// Subscribed before Listen returns: a cancellation sent after it is heard.
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return fmt.Errorf("subscribe to the agent's channels: %w", redactRedis(err))
	}
	go func() {
		defer ps.Close()
		ch := ps.Channel() // reconnects and resubscribes on its own
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				var c busCancelMsg
				if json.Unmarshal([]byte(m.Payload), &c) == nil && c.Run != "" {
					onCancel(c.Run, c.Action)
				}
			}
		}
	}()
	return nil
}

func (b *redisBus) Close() error { return b.rdb.Close() }
