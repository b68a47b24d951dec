"""Informers: list and watch of one resource into a ``store`` (``informer``), shared per
resource (``shared``), with their backoff, watermark, garbage-collector guard and metrics."""
