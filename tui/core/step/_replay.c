/* The CUDA caching allocator's replay in C: the same policy as `allocator.py` (its reference), over a training
 * run's program, for one stream and the default settings. Each rule is named as in
 * c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator) and as the Python replay names it: round_size,
 * get_pool, get_allocation_size, get_free_block (best fit), alloc_block (under the cap), release_cached_blocks,
 * should_split, alloc_found_block, free_block / try_merge_blocks.
 *
 * Loaded with ctypes (no CPython API: one library for every Python version). Built at install where a C compiler
 * exists (hatch_build.py); `tui/core/step/native.py` loads it and falls back to the Python replay where it is
 * absent, where BERT_TUI_PURE_PYTHON=1, or where this returns an error (a size past what 64 bits hold safely).
 *
 * The program: each event a kind (ALLOC, FREE, MOVE), a slot (an id made dense by the caller) and a size
 * c + d * batch (ALLOC; MOVE: c is the slot the block is handed on to). Sizes are unsigned 64-bit; a request
 * past REPLAY_MAX_REQUEST, or segments past REPLAY_MAX_BYTES, is an error (REPLAY_TOO_LARGE), never a wrap. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REPLAY_ABI 1

#define MIN_BLOCK ((uint64_t)512)              /* kMinBlockSize */
#define SMALL_SIZE ((uint64_t)1 << 20)         /* kSmallSize */
#define SMALL_BUFFER ((uint64_t)2 << 20)       /* kSmallBuffer */
#define LARGE_BUFFER ((uint64_t)20 << 20)      /* kLargeBuffer */
#define MIN_LARGE_ALLOC ((uint64_t)10 << 20)   /* kMinLargeAlloc */
#define ROUND_LARGE ((uint64_t)2 << 20)        /* kRoundLarge */
#define REPLAY_MAX_REQUEST ((uint64_t)1 << 61) /* the largest request replayed (2 EiB) */
#define REPLAY_MAX_BYTES ((uint64_t)1 << 62)   /* every segment's end and the bytes reserved stay below: no wrap */

enum { ALLOC = 0, FREE = 1, MOVE = 2 };
enum { REPLAY_OK = 0, REPLAY_TOO_LARGE = -1, REPLAY_NO_MEMORY = -2, REPLAY_BAD_PROGRAM = -3 };
/* out[]: what `allocator.Replay` holds */
enum { OUT_PEAK_ALLOCATED, OUT_PEAK_RESERVED, OUT_PEAK_PINNED, OUT_STRANDED, OUT_OUT_OF_MEMORY, OUT_STEPS,
       OUT_STEADY, OUT_FIELDS };

#define NONE (-1)

typedef struct {       /* a piece of a segment, handed out or cached free */
    uint64_t address;
    uint64_t size;
    int64_t prev;      /* the block before it in its segment (NONE: the segment's start) */
    int64_t next;      /* the block after it (NONE: the segment's end) */
    uint8_t small;     /* its pool */
    uint8_t in_use;
} Block;

typedef struct { uint64_t size, address; int64_t block; } Entry;   /* a pool's entry: BlockComparatorSize order */

typedef struct { Entry *items; int64_t count, capacity; } Pool;
typedef struct { uint64_t address, size; } Segment;
typedef struct { uint64_t *words; int64_t count, capacity; } Words;

typedef struct {
    Block *blocks;
    int64_t block_count, block_capacity, free_slot;   /* free_slot: a chain of unused Block records (via next) */
    Pool small, large;
    Segment *segments;                                 /* in address order: a new one always has the highest */
    int64_t segment_count, segment_capacity;
    uint64_t next_address, allocated, reserved, cached;
    uint64_t peak_allocated, peak_reserved, peak_pinned, stranded;
    int has_cap;
    uint64_t cap;
} Allocator;

static int grow(void **items, int64_t *capacity, int64_t need, size_t item) {
    if (need <= *capacity) return 1;
    int64_t more = *capacity ? *capacity * 2 : 64;
    while (more < need) more *= 2;
    void *moved = realloc(*items, (size_t)more * item);
    if (!moved) return 0;
    *items = moved;
    *capacity = more;
    return 1;
}

static uint64_t round_size(uint64_t nbytes) {
    return nbytes < MIN_BLOCK ? MIN_BLOCK : (nbytes + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
}

static uint64_t get_allocation_size(uint64_t size) {
    if (size <= SMALL_SIZE) return SMALL_BUFFER;
    if (size < MIN_LARGE_ALLOC) return LARGE_BUFFER;
    return (size + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
}

/* The first entry not before (size, address): bisect_left over the pool's keys. */
static int64_t lower_bound(const Pool *pool, uint64_t size, uint64_t address) {
    int64_t low = 0, high = pool->count;
    while (low < high) {
        int64_t middle = low + (high - low) / 2;
        const Entry *entry = &pool->items[middle];
        if (entry->size < size || (entry->size == size && entry->address < address)) low = middle + 1;
        else high = middle;
    }
    return low;
}

static int pool_insert(Pool *pool, const Block *blocks, int64_t block) {
    if (!grow((void **)&pool->items, &pool->capacity, pool->count + 1, sizeof(Entry))) return 0;
    uint64_t size = blocks[block].size, address = blocks[block].address;
    int64_t at = lower_bound(pool, size, address);
    memmove(&pool->items[at + 1], &pool->items[at], (size_t)(pool->count - at) * sizeof(Entry));
    pool->items[at] = (Entry){size, address, block};
    pool->count++;
    return 1;
}

static void pool_remove_at(Pool *pool, int64_t at) {
    memmove(&pool->items[at], &pool->items[at + 1], (size_t)(pool->count - at - 1) * sizeof(Entry));
    pool->count--;
}

static void pool_remove(Pool *pool, const Block *block) {
    pool_remove_at(pool, lower_bound(pool, block->size, block->address));
}

static int64_t new_block(Allocator *a) {
    if (a->free_slot != NONE) {
        int64_t slot = a->free_slot;
        a->free_slot = a->blocks[slot].next;
        return slot;
    }
    if (!grow((void **)&a->blocks, &a->block_capacity, a->block_count + 1, sizeof(Block))) return NONE;
    return a->block_count++;
}

static void drop_block(Allocator *a, int64_t block) {
    a->blocks[block].next = a->free_slot;
    a->free_slot = block;
}

static Pool *pool_of(Allocator *a, int small) { return small ? &a->small : &a->large; }

static int whole_segment(const Block *block) { return block->prev == NONE && block->next == NONE; }

/* alloc_block: a new segment, unless it would take the reserved bytes over the cap. NONE: refused (*error set
 * where the refusal is not the cap's). */
static int64_t alloc_block(Allocator *a, uint64_t size, int small, int *error) {
    if (a->has_cap && a->reserved + size > a->cap) return NONE;
    if (a->next_address > REPLAY_MAX_BYTES - size - ROUND_LARGE || a->reserved > REPLAY_MAX_BYTES - size) {
        *error = REPLAY_TOO_LARGE;
        return NONE;
    }
    if (!grow((void **)&a->segments, &a->segment_capacity, a->segment_count + 1, sizeof(Segment))) {
        *error = REPLAY_NO_MEMORY;
        return NONE;
    }
    int64_t block = new_block(a);
    if (block == NONE) {
        *error = REPLAY_NO_MEMORY;
        return NONE;
    }
    a->blocks[block] = (Block){a->next_address, size, NONE, NONE, (uint8_t)small, 0};
    a->segments[a->segment_count++] = (Segment){a->next_address, size};
    a->next_address += size + ROUND_LARGE;   /* segments never adjacent: they never merge */
    a->reserved += size;
    if (a->reserved > a->peak_reserved) a->peak_reserved = a->reserved;
    return block;
}

static int64_t segment_rank(const Allocator *a, uint64_t address) {   /* bisect_right(bases, address) - 1 */
    int64_t low = 0, high = a->segment_count;
    while (low < high) {
        int64_t middle = low + (high - low) / 2;
        if (a->segments[middle].address <= address) low = middle + 1;
        else high = middle;
    }
    return low - 1;
}

static void forget_segment(Allocator *a, uint64_t address) {
    int64_t at = segment_rank(a, address);
    memmove(&a->segments[at], &a->segments[at + 1], (size_t)(a->segment_count - at - 1) * sizeof(Segment));
    a->segment_count--;
}

/* release_cached_blocks: every cached block that is a whole segment given back. */
static void release_cached_blocks(Allocator *a) {
    uint64_t given = 0;
    for (int small = 1; small >= 0; small--) {
        Pool *pool = pool_of(a, small);
        int64_t kept = 0;
        for (int64_t i = 0; i < pool->count; i++) {
            int64_t block = pool->items[i].block;
            if (whole_segment(&a->blocks[block])) {
                forget_segment(a, a->blocks[block].address);
                given += a->blocks[block].size;
                drop_block(a, block);
            } else {
                pool->items[kept++] = pool->items[i];
            }
        }
        pool->count = kept;
    }
    a->reserved -= given;
    a->cached -= given;
}

/* free_block / try_merge_blocks: the block back to its pool, merged with its free neighbours. */
static int free_block(Allocator *a, int64_t block) {
    Block *b = &a->blocks[block];
    Pool *pool = pool_of(a, b->small);
    b->in_use = 0;
    a->allocated -= b->size;
    if (b->prev != NONE && !a->blocks[b->prev].in_use) {
        int64_t gone = b->prev;
        pool_remove(pool, &a->blocks[gone]);
        b->size += a->blocks[gone].size;
        b->address = a->blocks[gone].address;
        b->prev = a->blocks[gone].prev;
        if (b->prev != NONE) a->blocks[b->prev].next = block;
        drop_block(a, gone);
    }
    if (b->next != NONE && !a->blocks[b->next].in_use) {
        int64_t gone = b->next;
        pool_remove(pool, &a->blocks[gone]);
        b->size += a->blocks[gone].size;
        b->next = a->blocks[gone].next;
        if (b->next != NONE) a->blocks[b->next].prev = block;
        drop_block(a, gone);
    }
    if (whole_segment(b)) a->cached += b->size;
    return pool_insert(pool, a->blocks, block);
}

/* malloc: get_free_block (best fit), else alloc_block (after release_cached_blocks where the cap refuses), then
 * should_split / alloc_found_block. NONE with *error 0: out of memory. */
static int64_t malloc_block(Allocator *a, uint64_t size, int *error) {
    int small = size <= SMALL_SIZE;   /* get_pool */
    Pool *pool = pool_of(a, small);
    int64_t block;
    int64_t fit = lower_bound(pool, size, 0);
    if (fit < pool->count) {
        block = pool->items[fit].block;
        pool_remove_at(pool, fit);
        if (whole_segment(&a->blocks[block])) a->cached -= a->blocks[block].size;
    } else {
        uint64_t segment = get_allocation_size(size);
        block = alloc_block(a, segment, small, error);
        if (block == NONE && !*error) {
            release_cached_blocks(a);
            block = alloc_block(a, segment, small, error);
        }
        if (block == NONE) return NONE;
    }
    uint64_t rest = a->blocks[block].size - size;
    if (small ? rest >= MIN_BLOCK : rest > SMALL_SIZE) {   /* should_split */
        int64_t front = new_block(a);
        if (front == NONE) {
            *error = REPLAY_NO_MEMORY;
            return NONE;
        }
        Block *b = &a->blocks[block];
        a->blocks[front] = (Block){b->address, size, b->prev, block, (uint8_t)small, 1};
        if (b->prev != NONE) a->blocks[b->prev].next = front;
        b->prev = front;
        b->address += size;
        b->size = rest;
        if (!pool_insert(pool, a->blocks, block)) {
            *error = REPLAY_NO_MEMORY;
            return NONE;
        }
        block = front;
    } else {
        a->blocks[block].in_use = 1;
    }
    a->allocated += a->blocks[block].size;
    if (a->allocated > a->peak_allocated) a->peak_allocated = a->allocated;
    uint64_t pinned = a->reserved - a->cached;
    if (pinned > a->peak_pinned) {
        a->peak_pinned = pinned;
        a->stranded = pinned - a->allocated;
    }
    return block;
}

/* What the next allocations depend on (`CachingAllocator.state`, then the carried blocks' `where`), as words:
 * the segments' sizes in address order, every cached free block as (size, its segment's rank, its offset), small
 * pool then large, and each carried block's (rank, offset, size). */
static int snapshot(const Allocator *a, const int64_t *live, const int32_t *carried, int32_t carried_count,
                    Words *state) {
    int64_t need = 2 + a->segment_count + 3 * (a->small.count + a->large.count) + 3 * (int64_t)carried_count;
    if (!grow((void **)&state->words, &state->capacity, need, sizeof(uint64_t))) return REPLAY_NO_MEMORY;
    uint64_t *w = state->words;
    *w++ = (uint64_t)a->segment_count;
    for (int64_t i = 0; i < a->segment_count; i++) *w++ = a->segments[i].size;
    *w++ = (uint64_t)(a->small.count + a->large.count);
    for (int small = 1; small >= 0; small--) {
        const Pool *pool = small ? &a->small : &a->large;
        for (int64_t i = 0; i < pool->count; i++) {
            int64_t rank = segment_rank(a, pool->items[i].address);
            *w++ = pool->items[i].size;
            *w++ = (uint64_t)rank;
            *w++ = pool->items[i].address - a->segments[rank].address;
        }
    }
    for (int32_t i = 0; i < carried_count; i++) {
        int64_t block = live[carried[i]];
        if (block == NONE) return REPLAY_BAD_PROGRAM;
        int64_t rank = segment_rank(a, a->blocks[block].address);
        *w++ = (uint64_t)rank;
        *w++ = a->blocks[block].address - a->segments[rank].address;
        *w++ = a->blocks[block].size;
    }
    state->count = need;
    return REPLAY_OK;
}

typedef struct { const uint8_t *kind; const int32_t *slot; const uint64_t *c; const uint64_t *d; int64_t count; }
    Program;

/* One step's events. *ran_out: the index of the event that ran out (else -1). */
static int run_step(Allocator *a, const Program *p, uint64_t batch, int64_t *live, int32_t slots,
                    int64_t *ran_out) {
    *ran_out = -1;
    for (int64_t i = 0; i < p->count; i++) {
        int32_t slot = p->slot[i];
        if (slot < 0 || slot >= slots) return REPLAY_BAD_PROGRAM;
        if (p->kind[i] == FREE) {
            if (live[slot] == NONE) return REPLAY_BAD_PROGRAM;
            if (!free_block(a, live[slot])) return REPLAY_NO_MEMORY;
            live[slot] = NONE;
        } else if (p->kind[i] == MOVE) {
            uint64_t to = p->c[i];
            if (live[slot] == NONE || to >= (uint64_t)slots) return REPLAY_BAD_PROGRAM;
            int64_t block = live[slot];
            live[slot] = NONE;
            live[to] = block;
        } else if (p->kind[i] == ALLOC) {
            uint64_t c = p->c[i], d = p->d[i];
            if (c > REPLAY_MAX_REQUEST || (d && batch > (REPLAY_MAX_REQUEST - c) / d)) return REPLAY_TOO_LARGE;
            int error = 0;
            int64_t block = malloc_block(a, round_size(c + d * batch), &error);
            if (error) return error;
            if (block == NONE) {
                *ran_out = i;
                return REPLAY_OK;
            }
            live[slot] = block;
        } else {
            return REPLAY_BAD_PROGRAM;
        }
    }
    return REPLAY_OK;
}

int replay_abi(void) { return REPLAY_ABI; }

/* `allocator.replay_ops`: the first step, then the later one again and again until a step leaves the allocator in
 * a state an earlier one left it (settled), it runs out under the cap, or `limit` steps pass (not steady). */
int replay_steps(const uint8_t *kind1, const int32_t *slot1, const uint64_t *c1, const uint64_t *d1, int64_t n1,
                 const uint8_t *kind2, const int32_t *slot2, const uint64_t *c2, const uint64_t *d2, int64_t n2,
                 int32_t slots, const int32_t *carried, int32_t carried_count, uint64_t batch, int has_cap,
                 uint64_t cap, int32_t limit, uint64_t *out) {
    Program first = {kind1, slot1, c1, d1, n1}, later = {kind2, slot2, c2, d2, n2};
    Allocator a;
    memset(&a, 0, sizeof a);
    a.free_slot = NONE;
    a.has_cap = has_cap;
    a.cap = cap;
    int64_t *live = malloc(sizeof(int64_t) * (size_t)(slots > 0 ? slots : 1));
    Words *seen = calloc((size_t)(limit > 0 ? limit : 1), sizeof(Words));
    int status = live && seen ? REPLAY_OK : REPLAY_NO_MEMORY;
    for (int32_t i = 0; live && i < slots; i++) live[i] = NONE;
    int64_t done = 0, ran_out = -1, out_of_memory = -1;
    int32_t count = 0, steady = 0;
    for (int32_t step = 1; status == REPLAY_OK && step <= limit; step++) {
        const Program *p = step == 1 ? &first : &later;
        count = step;
        status = run_step(&a, p, batch, live, slots, &ran_out);
        if (status != REPLAY_OK) break;
        if (ran_out >= 0) {
            out_of_memory = done + ran_out;
            steady = 1;
            break;
        }
        done += p->count;
        Words *state = &seen[step - 1];
        status = snapshot(&a, live, carried, carried_count, state);
        for (int32_t j = 0; status == REPLAY_OK && j < step - 1; j++) {
            if (seen[j].count == state->count &&
                memcmp(seen[j].words, state->words, (size_t)state->count * sizeof(uint64_t)) == 0) {
                steady = 1;
                break;
            }
        }
        if (steady) break;
    }
    if (status == REPLAY_OK) {
        out[OUT_PEAK_ALLOCATED] = a.peak_allocated;
        out[OUT_PEAK_RESERVED] = a.peak_reserved;
        out[OUT_PEAK_PINNED] = a.peak_pinned;
        out[OUT_STRANDED] = a.stranded;
        out[OUT_OUT_OF_MEMORY] = out_of_memory < 0 ? 0 : (uint64_t)out_of_memory + 1;   /* 0: none */
        out[OUT_STEPS] = (uint64_t)count;
        out[OUT_STEADY] = (uint64_t)steady;
    }
    for (int32_t j = 0; seen && j < (limit > 0 ? limit : 1); j++) free(seen[j].words);
    free(seen);
    free(live);
    free(a.blocks);
    free(a.small.items);
    free(a.large.items);
    free(a.segments);
    return status;
}
