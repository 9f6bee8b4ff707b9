class SQSService:
    def __init__(self, ctx):
        self.ctx = ctx

    async def asgi(self, scope, receive, send):
        await send({"type": "http.response.start", "status": 501, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def close(self):
        pass
