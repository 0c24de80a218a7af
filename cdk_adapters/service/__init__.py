"""Many endpoints ("cells") as one service: `AdapterService`, placing each adapter family in one cell."""

from cdk_adapters.service.service import AdapterService, ServiceCell

__all__ = ["AdapterService", "ServiceCell"]
