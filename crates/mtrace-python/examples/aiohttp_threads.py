"""aiohttp (from PyPI) server in one thread and client in another: two
event loops, two OS threads, one GIL, a task per request on each side.
What the eleventh session used to check the streamed `gil` clock on a
program nobody here wrote (3,000 requests: 3.7M events, 9,074 stacks):

    pip install aiohttp   # into the venv that has mtrace
    python -m mtrace -o /tmp/aio2.bin crates/mtrace-python/examples/aiohttp_threads.py 3000
    mtanalyze /tmp/aio2.bin --stacks --group
"""
import asyncio, sys, threading
from aiohttp import web, ClientSession

async def handle(request: web.Request) -> web.Response:
    body = await request.read()
    await asyncio.sleep(0)
    return web.json_response({"n": len(body)})

def serve(ready: threading.Event, port_box: list[int], stop: threading.Event) -> None:
    async def run() -> None:
        app = web.Application()
        app.router.add_post("/echo", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_box.append(site._server.sockets[0].getsockname()[1])
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.01)
        await runner.cleanup()
    asyncio.run(run())

async def client(port: int, n: int) -> None:
    async with ClientSession() as s:
        sem = asyncio.Semaphore(32)
        async def one(i: int) -> None:
            async with sem:
                async with s.post(f"http://127.0.0.1:{port}/echo", data=b"x" * (i % 100)) as r:
                    await r.json()
        await asyncio.gather(*(one(i) for i in range(n)))

ready, stop = threading.Event(), threading.Event()
port_box: list[int] = []
t = threading.Thread(target=serve, args=(ready, port_box, stop), name="server")
t.start()
ready.wait()
asyncio.run(client(port_box[0], int(sys.argv[1])))
stop.set()
t.join()
