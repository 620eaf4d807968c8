"""The write path: create and update (``engine``), PATCH (``patcher``), DELETE (``deletion``),
server-side apply and field ownership, and the options and results they share."""
