"""A real third-party XXL-JOB executor (pyxxl, from PyPI) for the interop test.

Reads ADMIN (the admin API base, ending in /api/), TOKEN, PORT and LOGDIR from the environment,
registers as `pyxxl-app` and serves two handlers: pyHello returns its param, pyFail raises.
"""
import os

from pyxxl import ExecutorConfig, PyxxlRunner
from pyxxl.ctx import g

port = int(os.environ["PORT"])
config = ExecutorConfig(
    xxl_admin_baseurl=os.environ["ADMIN"],
    executor_app_name="pyxxl-app",
    access_token=os.environ["TOKEN"],
    executor_url=f"http://127.0.0.1:{port}",
    executor_listen_host="127.0.0.1",
    executor_listen_port=port,
    executor_log_path=os.path.join(os.environ["LOGDIR"], "pyxxl.log"),
    log_local_dir=os.environ["LOGDIR"],
)
app = PyxxlRunner(config)


@app.register(name="pyHello")
async def hello():
    return "hello from pyxxl: " + (g.xxl_run_data.executorParams or "")


@app.register(name="pyFail")
async def fail():
    raise ValueError("pyxxl says no")


app.run_executor()
