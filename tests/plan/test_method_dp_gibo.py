r"""``botorch_dp.plan.method_dp_gibo``, the old import path of ``botorch_dp.methods.dp_gibo`` (tested there)."""

from tests.helpers import check_old_import_path


def test_the_old_path_gives_the_same_objects_silently():
    check_old_import_path("botorch_dp.plan.method_dp_gibo", "botorch_dp.methods.dp_gibo")
