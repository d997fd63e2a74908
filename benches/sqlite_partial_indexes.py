#!/usr/bin/env python3
# What partial scheduler indexes on SQLite would save per run row: the pending INSERT and the
# final UPDATE (outcome and result together) of `xxl_job_log` with i_fire_state / i_alarm_fire
# full (as on SQLite today) or partial (as on PostgreSQL, migration 000009), 5,000 jobs a
# "second", process CPU per row (Python overhead included, the same in all). `none`: no secondary
# index but uk_job_fire, the bound of what index changes can save. BENCHMARKS.md, 2026-11-26, ac2fdb1; 2026-11-26, dc2dea4.
import sqlite3, time, os, sys
def run(mode, n=200000, batch=1000):
    partial = mode == 'partial'
    path=os.path.join(os.environ.get('TMPDIR', '/tmp'), 'xjob-partial-indexes.db')
    for f in (path, path+'-wal', path+'-shm'):
        if os.path.exists(f): os.remove(f)
    c=sqlite3.connect(path, isolation_level=None)
    c.execute('pragma journal_mode=WAL'); c.execute('pragma synchronous=NORMAL'); c.execute('pragma cache_size=-4096')
    c.execute('''create table xxl_job_log(id integer primary key autoincrement, job_group int, job_id int, executor_address text, executor_handler text,
      executor_param text, executor_sharding_param text, executor_fail_retry_count int, trigger_time text, trigger_code int, trigger_msg text,
      handle_time text, handle_code int, handle_msg text, alarm_status int, fire_time bigint, fire_state int, trigger_type text, chain_depth int)''')
    c.execute('create unique index uk_job_fire on xxl_job_log(job_id, fire_time)')
    if mode == 'none':
        return rows(c, n, batch)
    for s in ['create index I_trigger_time on xxl_job_log(trigger_time)','create index I_jobgroup on xxl_job_log(job_group)']:
        c.execute(s)
    w1 = ' where fire_state <> 0' if partial else ''
    w2 = ' where alarm_status = 0' if partial else ''
    c.execute('create index i_fire_state on xxl_job_log(fire_state, fire_time)'+w1)
    c.execute('create index i_alarm_fire on xxl_job_log(alarm_status, fire_state)'+w2)
    return rows(c, n, batch)
def rows(c, n, batch):
    jobs=5000
    t0=time.process_time()
    sec=0; done=0
    while done < n:
        sec+=1
        ids=[]
        c.execute('begin')
        for j in range(jobs):
            ft=1700000000000+sec*1000
            c.execute("insert or ignore into xxl_job_log(job_group,job_id,trigger_time,trigger_code,handle_code,executor_fail_retry_count,alarm_status,fire_time,fire_state,trigger_type,chain_depth) values (1,?,?,0,0,0,0,?,1,'CRON',0)", (j, '2023-11-14 22:13:%02d.000'%(sec%60), ft))
            ids.append(c.execute('select last_insert_rowid()').fetchone()[0])
        c.execute('commit')
        for k in range(0, jobs, batch//5):
            c.execute('begin')
            for i in ids[k:k+batch//5]:
                c.execute("update or ignore xxl_job_log set trigger_time=?, executor_address='http://127.0.0.1:9999/', executor_handler='echo', executor_param='p1', executor_fail_retry_count=0, trigger_code=200, trigger_msg='ok', trigger_type='CRON', fire_state=0, handle_code=200, handle_time=?, handle_msg=null, alarm_status=case when alarm_status=0 then 1 else alarm_status end where id=? and handle_code=0", ('2023-11-14 22:13:%02d.003'%(sec%60), '2023-11-14 22:13:%02d.005'%(sec%60), i))
            c.execute('commit')
        done+=jobs
    return (time.process_time()-t0)/n*1e6
for r in range(2):
    for m in ('full', 'partial', 'none'):
        print('%-7s' % m, '%.2f us/row' % run(m), flush=True)
