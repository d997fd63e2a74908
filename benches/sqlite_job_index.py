#!/usr/bin/env python3
# What the per-job unique index (uk_job_fire) costs a run row on SQLite, modelled outside xjob
# (BENCHMARKS.md, 2026-11-27, f294331): 5,000 jobs each firing every "second", rows inserted complete with
# xjob's SQLite indexes, CPU per row over the second half of the run (Python's overhead included,
# the same in all). Patterns: 10 commits a second, 1 a second, every 5 / 10 s sorted by job, no
# uk_job_fire (the bound); 2026-11-27, 3e17be7: the side index by job filled every 10 s (kept) and from a
# trigger-fed tail (not kept). Environment: PAGE (page size, 4096), CACHE (KiB, 4096), CKPT
# (wal_autocheckpoint pages, 1000), TMPDIR.
# Usage: python3 benches/sqlite_job_index.py [seconds]      (default 60)
import sqlite3, time, os, sys
LOG='''create table xxl_job_log(id integer primary key autoincrement, job_group int, job_id int, executor_address text, executor_handler text,
      executor_param text, executor_sharding_param text, executor_fail_retry_count int, trigger_time text, trigger_code int, trigger_msg text,
      handle_time text, handle_code int, handle_msg text, alarm_status int, fire_time bigint, fire_state int, trigger_type text, chain_depth int)'''
def setup(uk=True):
    path=os.path.join(os.environ.get('TMPDIR', '/tmp'), 'xjob-job-index.db')
    for f in (path, path+'-wal', path+'-shm'):
        if os.path.exists(f): os.remove(f)
    c=sqlite3.connect(path, isolation_level=None)
    c.execute('pragma page_size=%d' % int(os.environ.get('PAGE','4096'))); c.execute('pragma journal_mode=WAL'); c.execute('pragma wal_autocheckpoint=%d' % int(os.environ.get('CKPT','1000'))); c.execute('pragma synchronous=NORMAL'); c.execute('pragma cache_size=-%d' % int(os.environ.get('CACHE','4096')))
    c.execute(LOG)
    if uk: c.execute('create unique index uk_job_fire on xxl_job_log(job_id, fire_time)')
    c.execute('create index I_trigger_time on xxl_job_log(trigger_time)')
    c.execute('create index I_jobgroup on xxl_job_log(job_group)')
    c.execute('create index i_fire_state on xxl_job_log(fire_state, fire_time) where fire_state <> 0')
    c.execute('create index i_alarm_fire on xxl_job_log(alarm_status, fire_state) where alarm_status = 0')
    return c
INS="insert into xxl_job_log(id,job_group,job_id,fire_time,trigger_type,chain_depth,trigger_time,executor_address,executor_handler,executor_param,executor_fail_retry_count,trigger_code,trigger_msg,fire_state,handle_code,handle_time,handle_msg,alarm_status) values (?,1,?,?,'CRON',0,?,'http://127.0.0.1:9999/','echo','p1',0,200,?,0,200,?,null,1)"
MSG='\x011\x1fCRON\x1f127.0.0.1:8080\x1fA\x1fhttp://127.0.0.1:9999/\x1fROUND\x1f\x1fSERIAL_EXECUTION\x1f0\x1f0\x1f\x1fhttp://127.0.0.1:9999/\x1f200\x1f'
SIDE = "create table xjob_log_by_job (job_id integer not null, fire_key integer not null, log_id integer not null, primary key (job_id, fire_key, log_id)) without rowid"
def run(batch_s, per_s, secs, jobs=5000, uk=True, sort=False, side_s=0, tail=False):
    # side_s: no uk_job_fire; uk_fire_job (fire_time, job_id) and the side index filled every
    # side_s seconds from the rows above the mark (2026-11-27, 3e17be7, kept); tail: the same, filled from
    # a tail table a trigger appends each row to (2026-11-27, 3e17be7, not kept)
    c=setup(uk and not side_s)
    if side_s:
        c.execute('create unique index uk_fire_job on xxl_job_log(fire_time, job_id)')
        c.execute(SIDE)
        c.execute("create trigger d after delete on xxl_job_log begin delete from xjob_log_by_job where job_id = old.job_id and fire_key = coalesce(old.fire_time, -9223372036854775808) and log_id = old.id; end")
        if tail:
            c.execute("create table tail (log_id integer primary key, job_id integer not null, fire_key integer not null)")
            c.execute("create trigger i after insert on xxl_job_log begin insert or replace into tail values (new.id, new.job_id, coalesce(new.fire_time, -9223372036854775808)); end")
    pending=[]; nextid=1; mark=1
    t0=time.process_time(); tw=0; rows=0; warm=secs//2
    for sec in range(1, secs+1):
        ft=1700000000000+sec*1000
        tt='2023-11-14 22:%02d:%02d.003'%((sec//60)%60, sec%60)
        for j in range(jobs):
            pending.append((nextid, j, ft, tt, MSG, tt)); nextid+=1
        # commit cadence: per_s commits a second when batch_s == 0 ; else every batch_s seconds
        if batch_s == 0:
            step=len(pending)//per_s
            for k in range(per_s):
                chunk=pending[k*step:(k+1)*step] if k<per_s-1 else pending[k*step:]
                s=time.process_time()
                c.execute('begin'); c.executemany(INS, chunk); c.execute('commit')
                if sec>warm: tw+=time.process_time()-s; rows+=len(chunk)
            pending=[]
        elif sec % batch_s == 0:
            if sort: pending.sort(key=lambda r:(r[1], r[2]))
            s=time.process_time()
            c.execute('begin'); c.executemany(INS, pending); c.execute('commit')
            if sec>warm: tw+=time.process_time()-s; rows+=len(pending)
            pending=[]
        if side_s and sec % side_s == 0:
            s=time.process_time()
            c.execute('begin')
            if tail:
                c.execute("insert or ignore into xjob_log_by_job select job_id, fire_key, log_id from tail order by 1, 2, 3"); c.execute("delete from tail")
            else:
                c.execute("insert or ignore into xjob_log_by_job select job_id, coalesce(fire_time, -9223372036854775808), id from xxl_job_log where id >= ? and id < ? order by 1, 2, 3", (mark, nextid)); mark=nextid
            c.execute('commit')
            if sec>warm: tw+=time.process_time()-s
    return tw/rows*1e6
secs=int(sys.argv[1]) if len(sys.argv)>1 else 60
for name,args in [('10 commits/s',dict(batch_s=0,per_s=10)),('1 commit/s',dict(batch_s=1,per_s=1)),('5 s sorted',dict(batch_s=5,per_s=1,sort=True)),('10 s sorted',dict(batch_s=10,per_s=1,sort=True)),('10 commits/s no uk',dict(batch_s=0,per_s=10,uk=False)),('side index every 10 s',dict(batch_s=0,per_s=10,side_s=10)),('trigger-fed tail, 30 s',dict(batch_s=0,per_s=10,side_s=30,tail=True))]:
    print(f"{name:22s} {run(secs=secs,**args):.2f} us/row (second half of {secs} s)", flush=True)
