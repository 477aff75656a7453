/*
 * test_queue.c - the scheduling queue: transitions as a table of events ->
 * expected queue state, backoff timing and pool flushes with an injected
 * clock, the cap, in-flight updates and removals, blocking pop/shutdown,
 * holding (leader election's standby).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agentsched/fastpath/queue.h"
#include "core_fixtures.h"

typedef struct fake_clock {
    int64_t ms; /* atomic */
} fake_clock;

static int64_t fake_now(void *arg)
{
    return __atomic_load_n(&((fake_clock *)arg)->ms, __ATOMIC_RELAXED);
}

static queue *new_queue(fake_clock *clk, size_t max_pods)
{
    queue_config cfg;
    queue_config_defaults(&cfg);
    cfg.clock = fake_now;
    cfg.clock_arg = clk;
    cfg.max_pods = max_pods;
    queue *q = NULL;
    cr_assert_eq(queue_new(&cfg, &q), AS_OK);
    return q;
}

static model_pod *pod_prio(const char *uid, int32_t prio)
{
    model_pod *p = fx_pod(uid, uid, 100, FX_GI);
    p->priority = prio;
    return p;
}

/* ---- the table ---------------------------------------------------- */

typedef enum op {
    END = 0,
    ADD,     /* uid, arg = priority */
    UPDATE,  /* uid, arg = new cpu request (0: same spec) */
    REMOVE,  /* uid */
    POP,     /* expect uid popped ("" = nothing ready) */
    UNSCHED, /* settle the in-flight uid */
    BACKOFF,
    URGENT,
    DONE,
    MOVE,    /* queue_move_all; arg = expected count */
    ADVANCE, /* clock += arg ms */
    SYNC_BEGIN,
    SYNC_END, /* arg = expected removed */
    WHERE,    /* uid is in sub-queue arg (queue_where) */
    DEPTHS,   /* arg = active*1000 + backoff*100 + unsched*10 + inflight */
} op;

typedef struct step {
    op op;
    const char *uid;
    int64_t arg;
} step;

typedef struct scenario {
    const char *name;
    step steps[40];
} scenario;

static const scenario scenarios[] = {
    {"priority then arrival",
     {{ADD, "a", 0},
      {ADD, "b", 10},
      {ADD, "c", 0},
      {ADD, "d", 10},
      {DEPTHS, NULL, 4000},
      {POP, "b", 0},
      {POP, "d", 0},
      {POP, "a", 0},
      {POP, "c", 0},
      {POP, "", 0},
      {DEPTHS, NULL, 4},
      {DONE, "a", 0},
      {DONE, "b", 0},
      {DONE, "c", 0},
      {DONE, "d", 0},
      {DEPTHS, NULL, 0}}},
    {"unschedulable waits for a cluster event",
     {{ADD, "a", 0},
      {POP, "a", 0},
      {UNSCHED, "a", 0},
      {WHERE, "a", QUEUE_UNSCHED},
      {ADVANCE, NULL, 60000},
      {POP, "", 0},
      {MOVE, NULL, 1},
      {WHERE, "a", QUEUE_ACTIVE}, /* backoff (1 s) long over */
      {POP, "a", 0},
      {DONE, "a", 0},
      {DEPTHS, NULL, 0}}},
    {"moved during backoff goes to backoffQ",
     {{ADD, "a", 0},
      {POP, "a", 0},
      {UNSCHED, "a", 0},
      {ADVANCE, NULL, 500},
      {MOVE, NULL, 1},
      {WHERE, "a", QUEUE_BACKOFF},
      {POP, "", 0},
      {ADVANCE, NULL, 499},
      {POP, "", 0},
      {ADVANCE, NULL, 1},
      {POP, "a", 0},
      {DONE, "a", 0}}},
    {"event while in flight: failure goes to backoffQ, not the pool",
     {{ADD, "a", 0},
      {POP, "a", 0},
      {MOVE, NULL, 0},
      {UNSCHED, "a", 0},
      {WHERE, "a", QUEUE_BACKOFF},
      {ADVANCE, NULL, 1000},
      {POP, "a", 0},
      {UNSCHED, "a", 0}, /* no event this time */
      {WHERE, "a", QUEUE_UNSCHED},
      {REMOVE, "a", 0},
      {DEPTHS, NULL, 0}}},
    {"urgent retry jumps the queue and skips backoff",
     {{ADD, "a", 0},
      {ADD, "b", 100},
      {ADD, "c", 1000},
      {POP, "c", 0},
      {POP, "b", 0},
      {URGENT, "c", 0},
      {WHERE, "c", QUEUE_ACTIVE},
      {ADD, "d", 2000},
      {POP, "c", 0}, /* urgent beats a higher priority */
      {POP, "d", 0},
      {URGENT, "b", 0},
      {POP, "b", 0},
      {POP, "a", 0},
      {DEPTHS, NULL, 4}}},
    {"backoff after an API bind failure",
     {{ADD, "a", 0},
      {POP, "a", 0},
      {BACKOFF, "a", 0},
      {WHERE, "a", QUEUE_BACKOFF},
      {MOVE, NULL, 0}, /* not in the pool: a move does not touch it */
      {ADVANCE, NULL, 999},
      {POP, "", 0},
      {ADVANCE, NULL, 1},
      {POP, "a", 0},
      {BACKOFF, "a", 0}, /* second failure: 2 s */
      {ADVANCE, NULL, 1999},
      {POP, "", 0},
      {ADVANCE, NULL, 1},
      {POP, "a", 0},
      {DONE, "a", 0}}},
    {"deleted or bound elsewhere while queued leaves the queue",
     {{ADD, "a", 0},
      {ADD, "b", 0},
      {ADD, "c", 0},
      {REMOVE, "a", 0},
      {POP, "b", 0},
      {UNSCHED, "b", 0},
      {REMOVE, "b", 0},
      {POP, "c", 0},
      {REMOVE, "c", 0}, /* in flight: marked gone */
      {WHERE, "c", QUEUE_ABSENT},
      {DEPTHS, NULL, 1},
      {URGENT, "c", 0}, /* settling a gone pod drops it */
      {DEPTHS, NULL, 0},
      {POP, "", 0}}},
    {"status-only update keeps the pool; spec update moves back",
     {{ADD, "a", 0},
      {POP, "a", 0},
      {UNSCHED, "a", 0},
      {UPDATE, "a", 0},
      {WHERE, "a", QUEUE_UNSCHED},
      {UPDATE, "a", 50},
      {WHERE, "a", QUEUE_ACTIVE},
      {POP, "a", 0},
      {DONE, "a", 0}}},
    {"update while in flight is kept",
     {{ADD, "a", 0},
      {POP, "a", 0},
      {UPDATE, "a", 7},
      {UNSCHED, "a", 0}, /* the relevant update counts as an event */
      {WHERE, "a", QUEUE_BACKOFF},
      {ADVANCE, NULL, 1000},
      {POP, "a", 0},
      {DONE, "a", 0}}},
    {"relist drops pods that vanished",
     {{ADD, "a", 0},
      {ADD, "b", 0},
      {ADD, "c", 0},
      {POP, "a", 0},
      {SYNC_BEGIN, NULL, 0},
      {UPDATE, "b", 0},
      {SYNC_END, NULL, 2}, /* a (in flight) and c */
      {WHERE, "a", QUEUE_ABSENT},
      {WHERE, "b", QUEUE_ACTIVE},
      {WHERE, "c", QUEUE_ABSENT},
      {DONE, "a", 0},
      {DEPTHS, NULL, 1000}}},
    {"pool flushed after five minutes",
     {{ADD, "a", 0},
      {POP, "a", 0},
      {UNSCHED, "a", 0},
      {ADVANCE, NULL, 299999},
      {WHERE, "a", QUEUE_UNSCHED},
      {POP, "", 0},
      {ADVANCE, NULL, 1},
      {POP, "a", 0},
      {DONE, "a", 0}}},
};

static queue_item inflight[16];
static char inflight_uid[16][16];

static queue_item *find_inflight(const char *uid)
{
    for (int i = 0; i < 16; i++)
        if (inflight[i].e && strcmp(inflight_uid[i], uid) == 0)
            return &inflight[i];
    cr_assert_fail("%s is not in flight", uid);
    return NULL;
}

static void run_scenario(const scenario *sc)
{
    fake_clock clk = {1000000};
    queue *q = new_queue(&clk, 0);
    memset(inflight, 0, sizeof inflight);
    for (int i = 0; sc->steps[i].op != END; i++) {
        const step *s = &sc->steps[i];
        queue_stats st;
        switch (s->op) {
        case ADD:
            cr_assert_eq(queue_add(q, pod_prio(s->uid, (int32_t)s->arg)), AS_OK);
            break;
        case UPDATE: {
            model_pod *p = pod_prio(s->uid, 0);
            if (s->arg)
                p->req.v[MODEL_RES_CPU] = s->arg;
            cr_assert_eq(queue_add(q, p), AS_OK);
            break;
        }
        case REMOVE:
            cr_assert(queue_remove(q, s->uid), "%s step %d", sc->name, i);
            break;
        case POP: {
            queue_item it;
            as_err err = queue_pop(q, 0, &it);
            if (!s->uid[0]) {
                cr_assert_eq(err, AS_ETIMEOUT, "%s step %d: popped %s", sc->name, i,
                             err ? "-" : it.pod->uid);
                break;
            }
            cr_assert_eq(err, AS_OK, "%s step %d: nothing to pop", sc->name, i);
            cr_assert_str_eq(it.pod->uid, s->uid, "%s step %d", sc->name, i);
            int slot = 0;
            while (inflight[slot].e)
                slot++;
            inflight[slot] = it;
            snprintf(inflight_uid[slot], sizeof inflight_uid[slot], "%s", s->uid);
            break;
        }
        case UNSCHED:
        case BACKOFF:
        case URGENT:
        case DONE: {
            queue_item *it = find_inflight(s->uid);
            if (s->op == UNSCHED)
                queue_unschedulable(q, it->e);
            else if (s->op == BACKOFF)
                queue_backoff(q, it->e);
            else if (s->op == URGENT)
                queue_urgent(q, it->e);
            else
                queue_done(q, it->e);
            it->e = NULL;
            break;
        }
        case MOVE:
            cr_assert_eq(queue_move_all(q), (size_t)s->arg, "%s step %d", sc->name, i);
            break;
        case ADVANCE:
            clk.ms += s->arg;
            break;
        case SYNC_BEGIN:
            queue_sync_begin(q);
            break;
        case SYNC_END:
            cr_assert_eq(queue_sync_end(q), (size_t)s->arg, "%s step %d", sc->name, i);
            break;
        case WHERE: {
            queue_where w = queue_where_is(q, s->uid, NULL);
            cr_assert_eq(w, (queue_where)s->arg, "%s step %d: %s is %s, expected %s", sc->name, i,
                         s->uid, queue_where_name(w), queue_where_name((queue_where)s->arg));
            break;
        }
        case DEPTHS:
            queue_get_stats(q, &st);
            cr_assert_eq(st.active * 1000 + st.backoff * 100 + st.unsched * 10 + st.inflight,
                         (size_t)s->arg,
                         "%s step %d: active %zu backoff %zu unsched %zu "
                         "inflight %zu",
                         sc->name, i, st.active, st.backoff, st.unsched, st.inflight);
            break;
        case END:
            break;
        }
    }
    queue_free(q); /* frees in-flight leftovers too */
}

Test(queue, transitions_table)
{
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        run_scenario(&scenarios[i]);
}

Test(queue, backoff_doubles_to_the_cap)
{
    fake_clock clk = {0};
    queue *q = new_queue(&clk, 0);
    static const int64_t want[] = {1000, 2000, 4000, 8000, 10000, 10000, 10000};
    cr_assert_eq(queue_add(q, pod_prio("p", 0)), AS_OK);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cr_assert_eq(queue_backoff_ms(q, (unsigned)i + 1), want[i]);
        queue_item it;
        cr_assert_eq(queue_pop(q, 0, &it), AS_OK, "attempt %zu", i);
        cr_assert_eq(it.attempts, (unsigned)i);
        queue_backoff(q, it.e);
        clk.ms += want[i] - 1;
        cr_assert_eq(queue_pop(q, 0, &it), AS_ETIMEOUT, "attempt %zu: too early", i);
        clk.ms += 1;
    }
    queue_item it;
    cr_assert_eq(queue_pop(q, 0, &it), AS_OK);
    queue_done(q, it.e);
    queue_free(q);
}

Test(queue, backoff_configurable)
{
    fake_clock clk = {0};
    queue_config cfg;
    queue_config_defaults(&cfg);
    cfg.clock = fake_now;
    cfg.clock_arg = &clk;
    cfg.backoff_initial_ms = 10;
    cfg.backoff_max_ms = 35;
    queue *q = NULL;
    cr_assert_eq(queue_new(&cfg, &q), AS_OK);
    cr_assert_eq(queue_backoff_ms(q, 0), 0);
    cr_assert_eq(queue_backoff_ms(q, 1), 10);
    cr_assert_eq(queue_backoff_ms(q, 2), 20);
    cr_assert_eq(queue_backoff_ms(q, 3), 35);
    cr_assert_eq(queue_backoff_ms(q, 60), 35);
    queue_free(q);
}

Test(queue, cap_rejects_new_pods_and_says_so)
{
    fake_clock clk = {0};
    queue *q = new_queue(&clk, 2);
    cr_assert_eq(queue_add(q, pod_prio("a", 0)), AS_OK);
    cr_assert_eq(queue_add(q, pod_prio("b", 0)), AS_OK);
    cr_assert_eq(queue_add(q, pod_prio("c", 0)), AS_ELIMIT);
    cr_assert_eq(queue_add(q, pod_prio("a", 5)), AS_OK); /* updates still apply */
    queue_stats st;
    queue_get_stats(q, &st);
    cr_assert(st.full);
    cr_assert_eq(st.rejected_full, 1);
    cr_assert_eq(st.total, 2);
    cr_assert(queue_remove(q, "b"));
    cr_assert_eq(queue_add(q, pod_prio("c", 0)), AS_OK);
    queue_get_stats(q, &st);
    cr_assert_eq(st.total, 2);
    queue_free(q);
}

Test(queue, pod_without_uid_is_keyed_by_name)
{
    fake_clock clk = {0};
    queue *q = new_queue(&clk, 0);
    model_pod *p = fx_pod("web", NULL, 100, FX_GI);
    cr_assert_eq(queue_add(q, p), AS_OK);
    cr_assert_eq(queue_where_is(q, "default/web", NULL), QUEUE_ACTIVE);
    cr_assert(queue_remove(q, "default/web"));
    queue_free(q);
}

typedef struct popper {
    queue *q;
    as_err err;
    char uid[32];
} popper;

static void *pop_thread(void *arg)
{
    popper *p = arg;
    queue_item it;
    p->err = queue_pop(p->q, -1, &it);
    if (p->err == AS_OK) {
        snprintf(p->uid, sizeof p->uid, "%s", it.pod->uid);
        queue_done(p->q, it.e);
    }
    return NULL;
}

Test(queue, blocking_pop_wakes_on_add_and_on_shutdown)
{
    queue *q = NULL;
    cr_assert_eq(queue_new(NULL, &q), AS_OK);
    popper p = {q, AS_EINTERNAL, ""};
    pthread_t t;
    pthread_create(&t, NULL, pop_thread, &p);
    usleep(20000);
    cr_assert_eq(queue_add(q, pod_prio("x", 0)), AS_OK);
    pthread_join(t, NULL);
    cr_assert_eq(p.err, AS_OK);
    cr_assert_str_eq(p.uid, "x");

    popper p2 = {q, AS_EINTERNAL, ""};
    pthread_create(&t, NULL, pop_thread, &p2);
    usleep(20000);
    queue_shutdown(q);
    pthread_join(t, NULL);
    cr_assert_eq(p2.err, AS_EGONE);
    queue_free(q);
}

Test(queue, held_queue_hands_out_nothing_but_keeps_following_pods)
{
    queue *q = NULL;
    cr_assert_eq(queue_new(NULL, &q), AS_OK);
    queue_hold(q, true);
    cr_assert(queue_held(q));
    cr_assert_eq(queue_add(q, pod_prio("a", 0)), AS_OK);
    cr_assert_eq(queue_add(q, pod_prio("b", 0)), AS_OK);
    cr_assert(queue_remove(q, "b"), "removals go on while held");
    queue_item it;
    cr_assert_eq(queue_pop(q, 0, &it), AS_ETIMEOUT);
    cr_assert_eq(queue_pop(q, 30, &it), AS_ETIMEOUT, "a held queue's timeout still applies");
    cr_assert_eq(queue_where_is(q, "a", NULL), QUEUE_ACTIVE);

    /* A popper blocked while held wakes when the hold is lifted. */
    popper p = {q, AS_EINTERNAL, ""};
    pthread_t t;
    pthread_create(&t, NULL, pop_thread, &p);
    usleep(20000);
    cr_assert_eq(p.err, AS_EINTERNAL, "popped from a held queue");
    queue_hold(q, false);
    pthread_join(t, NULL);
    cr_assert_eq(p.err, AS_OK);
    cr_assert_str_eq(p.uid, "a");
    cr_assert_eq(queue_where_is(q, "b", NULL), QUEUE_ABSENT);
    queue_free(q);
}

/* queue_add_take hands a new pod out at once only when activeQ is empty
 * and the queue neither held nor shut down; otherwise it is queue_add. */
Test(queue, add_take_hands_out_a_pod_that_finds_activeq_empty)
{
    fake_clock clk = {0};
    queue *q = new_queue(&clk, 0);
    queue_item it;
    cr_assert_eq(queue_add_take(q, pod_prio("a", 0), &it), AS_OK);
    cr_assert_not_null(it.e, "activeQ was empty: a is handed out");
    cr_assert_str_eq(it.pod->uid, "a");
    cr_assert_eq(it.attempts, 0);
    cr_assert_eq(queue_where_is(q, "a", NULL), QUEUE_INFLIGHT);
    /* An update of the in-flight pod is kept for its settle, not handed out. */
    queue_item up;
    cr_assert_eq(queue_add_take(q, pod_prio("a", 0), &up), AS_OK);
    cr_assert_null(up.e);
    /* b finds activeQ empty too (a is in flight, not queued). */
    queue_item ib;
    cr_assert_eq(queue_add_take(q, pod_prio("b", 0), &ib), AS_OK);
    cr_assert_not_null(ib.e);
    queue_unschedulable(q, ib.e);
    queue_done(q, it.e);
    /* With a pod waiting in activeQ the new one queues behind it. */
    cr_assert_eq(queue_add(q, pod_prio("c", 0)), AS_OK);
    queue_item id;
    cr_assert_eq(queue_add_take(q, pod_prio("d", 0), &id), AS_OK);
    cr_assert_null(id.e);
    cr_assert_eq(queue_where_is(q, "d", NULL), QUEUE_ACTIVE);
    queue_item p1, p2;
    cr_assert_eq(queue_pop(q, 0, &p1), AS_OK);
    cr_assert_str_eq(p1.pod->uid, "c");
    cr_assert_eq(queue_pop(q, 0, &p2), AS_OK);
    cr_assert_str_eq(p2.pod->uid, "d");
    queue_done(q, p1.e);
    queue_done(q, p2.e);
    /* Held (a standby replica): queued, not handed out. */
    queue_hold(q, true);
    queue_item ie;
    cr_assert_eq(queue_add_take(q, pod_prio("e", 0), &ie), AS_OK);
    cr_assert_null(ie.e);
    cr_assert_eq(queue_where_is(q, "e", NULL), QUEUE_ACTIVE);
    queue_hold(q, false);
    cr_assert(queue_remove(q, "e"));
    /* Shut down: queued, not handed out. */
    queue_shutdown(q);
    queue_item ig;
    cr_assert_eq(queue_add_take(q, pod_prio("g", 0), &ig), AS_OK);
    cr_assert_null(ig.e);
    queue_stats st;
    queue_get_stats(q, &st);
    cr_assert_eq(st.inflight, 0);
    queue_free(q);
}

Test(queue, pop_timeout_and_real_backoff)
{
    queue_config cfg;
    queue_config_defaults(&cfg);
    cfg.backoff_initial_ms = 30;
    queue *q = NULL;
    cr_assert_eq(queue_new(&cfg, &q), AS_OK);
    queue_item it;
    cr_assert_eq(queue_pop(q, 10, &it), AS_ETIMEOUT);
    cr_assert_eq(queue_add(q, pod_prio("x", 0)), AS_OK);
    cr_assert_eq(queue_pop(q, 10, &it), AS_OK);
    queue_backoff(q, it.e);
    /* the blocking pop sleeps until the backoff expires by itself */
    cr_assert_eq(queue_pop(q, 2000, &it), AS_OK);
    cr_assert_eq(it.attempts, 1);
    queue_done(q, it.e);
    queue_free(q);
}
