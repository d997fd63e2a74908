#!/usr/bin/env python3
# What the fire journal saves per run row on SQLite, modelled outside xjob (BENCHMARKS.md,
# History, 2026-11-27, `75cc759`): 5,000 jobs a "second" for 40 "seconds", CPU per row (Python
# overhead included, the same in all). full / partial: a pending row per fire in the scan, then the final update (scheduler
# indexes full or partial); journal[_partial]: a journal table row per fire, the final row by
# INSERT ... SELECT, the journal row deleted; blob[_partial]: one journal blob per "second", the
# final row inserted once; blobsel: the same by INSERT OR IGNORE ... SELECT ... WHERE EXISTS.
# Usage: python3 benches/sqlite_fire_journal.py [mode ...]
import sqlite3, time, os, sys
LOG='''create table xxl_job_log(id integer primary key autoincrement, job_group int, job_id int, executor_address text, executor_handler text,
      executor_param text, executor_sharding_param text, executor_fail_retry_count int, trigger_time text, trigger_code int, trigger_msg text,
      handle_time text, handle_code int, handle_msg text, alarm_status int, fire_time bigint, fire_state int, trigger_type text, chain_depth int)'''
def setup(mode):
    path=os.path.join(os.environ.get('TMPDIR', '/tmp'), 'xjob-fire-journal.db')
    for f in (path, path+'-wal', path+'-shm'):
        if os.path.exists(f): os.remove(f)
    c=sqlite3.connect(path, isolation_level=None)
    c.execute('pragma journal_mode=WAL'); c.execute('pragma synchronous=NORMAL'); c.execute('pragma cache_size=-4096')
    c.execute(LOG)
    c.execute('create unique index uk_job_fire on xxl_job_log(job_id, fire_time)')
    c.execute('create index I_trigger_time on xxl_job_log(trigger_time)')
    c.execute('create index I_jobgroup on xxl_job_log(job_group)')
    partial = 'partial' in mode
    c.execute('create index i_fire_state on xxl_job_log(fire_state, fire_time)'+(' where fire_state <> 0' if partial else ''))
    c.execute('create index i_alarm_fire on xxl_job_log(alarm_status, fire_state)'+(' where alarm_status = 0' if partial else ''))
    c.execute('create table info(id integer primary key, x text)')
    c.executemany('insert into info values (?, ?)', [(i, 'x'*400) for i in range(5000)])
    c.execute('create table j(id integer primary key, job_group int, job_id int, fire_time bigint, trigger_type text, chain_depth int)')
    return c
def run(mode, secs=40, jobs=5000):
    c=setup(mode)
    journal = mode.startswith('journal')
    nextid=1
    t0=time.process_time()
    for sec in range(1, secs+1):
        ft=1700000000000+sec*1000
        tt='2023-11-14 22:13:%02d.000'%(sec%60)
        c.execute('begin')
        if mode.startswith('blob'):
            c.execute("insert into j(id, trigger_type) values (?, ?)", (sec, b'x'*(20*jobs)))
            ids=list(range(nextid, nextid+jobs)); nextid+=jobs
        elif journal:
            rows=[(nextid+j, 1, j, ft) for j in range(jobs)]
            c.executemany("insert into j values (?,?,?,?,'CRON',0)", rows)
            ids=[r[0] for r in rows]; nextid+=jobs
        else:
            c.executemany("insert or ignore into xxl_job_log(job_group,job_id,trigger_time,trigger_code,handle_code,executor_fail_retry_count,alarm_status,fire_time,fire_state,trigger_type,chain_depth) values (1,?,?,0,0,0,0,?,1,'CRON',0)", [(j, tt, ft) for j in range(jobs)])
            last=c.execute('select last_insert_rowid()').fetchone()[0]
            ids=list(range(last-jobs+1, last+1))
        c.execute('commit')
        tt2='2023-11-14 22:13:%02d.003'%(sec%60); ht='2023-11-14 22:13:%02d.005'%(sec%60)
        for k in range(0, jobs, 1000):
            c.execute('begin')
            chunk=ids[k:k+1000]
            if mode.startswith('blobsel'):
                c.executemany("insert or ignore into xxl_job_log(id,job_group,job_id,fire_time,trigger_type,chain_depth,trigger_time,executor_address,executor_handler,executor_param,executor_fail_retry_count,trigger_code,trigger_msg,fire_state,handle_code,handle_time,handle_msg,alarm_status) select ?,1,?,?,'CRON',0,?,'http://127.0.0.1:9999/','echo','p1',0,200,'ok',0,200,?,null,1 where exists (select 1 from info where id = ?)", [(i, i%jobs, ft, tt2, ht, i%jobs) for i in chunk])
            elif mode.startswith('blob'):
                c.executemany("insert into xxl_job_log(id,job_group,job_id,fire_time,trigger_type,chain_depth,trigger_time,executor_address,executor_handler,executor_param,executor_fail_retry_count,trigger_code,trigger_msg,fire_state,handle_code,handle_time,handle_msg,alarm_status) values (?,1,?,?,'CRON',0,?,'http://127.0.0.1:9999/','echo','p1',0,200,'ok',0,200,?,null,1)", [(i, i%jobs, ft, tt2, ht) for i in chunk])
            elif journal:
                c.executemany("insert into xxl_job_log(id,job_group,job_id,fire_time,trigger_type,chain_depth,trigger_time,executor_address,executor_handler,executor_param,executor_fail_retry_count,trigger_code,trigger_msg,fire_state,handle_code,handle_time,handle_msg,alarm_status) select id,job_group,job_id,fire_time,trigger_type,chain_depth,?,'http://127.0.0.1:9999/','echo','p1',0,200,'ok',0,200,?,null,1 from j where id=?", [(tt2, ht, i) for i in chunk])
                c.executemany("delete from j where id=?", [(i,) for i in chunk])
            else:
                c.executemany("update or ignore xxl_job_log set trigger_time=?, executor_address='http://127.0.0.1:9999/', executor_handler='echo', executor_param='p1', executor_fail_retry_count=0, trigger_code=200, trigger_msg='ok', trigger_type='CRON', fire_state=0, handle_code=200, handle_time=?, handle_msg=null, alarm_status=case when alarm_status=0 then 1 else alarm_status end where id=? and handle_code=0", [(tt2, ht, i) for i in chunk])
            c.execute('commit')
        if mode.startswith('blob'): c.execute('delete from j where id=?', (sec,))
    return (time.process_time()-t0)/(secs*jobs)*1e6
modes = sys.argv[1:] or ['full','partial','journal','journal_partial']
for r in range(2):
    for m in modes:
        print('%-16s' % m, '%.2f us/row' % run(m), flush=True)
