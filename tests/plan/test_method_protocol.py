r"""``botorch_dp.plan.method_protocol``, the old import path of ``botorch_dp.methods.protocol`` (tested there)."""

from tests.helpers import check_old_import_path


def test_the_old_path_gives_the_same_objects_silently():
    check_old_import_path("botorch_dp.plan.method_protocol", "botorch_dp.methods.protocol")
