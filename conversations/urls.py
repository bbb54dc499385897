from __future__ import annotations

from django.urls import path

from conversations import chat_settings_pages, preset_pages, settings_pages, views
from conversations import knowledge_pages as knowledge
from conversations import organise_pages as organise
from conversations.branches import views as branch_views
from conversations.transfer import views as share_views

urlpatterns = [
    path("", views.conversation_list, name="conversation_list"),
    path("c/new/", views.conversation_new, name="conversation_new"),
    path("c/list/", views.conversation_rows, name="conversation_rows"),
    path("c/<id:conversation_id>/", views.conversation_detail, name="conversation_detail"),
    path("c/<id:conversation_id>/messages/", views.message_post, name="message_post"),
    path("c/<id:conversation_id>/rename/", views.conversation_rename, name="conversation_rename"),
    path(
        "c/<id:conversation_id>/archive/", views.conversation_archive, name="conversation_archive"
    ),
    path("c/<id:conversation_id>/delete/", views.conversation_delete, name="conversation_delete"),
    path("c/<id:conversation_id>/model/", views.conversation_model, name="conversation_model"),
    path("c/<id:conversation_id>/mode/", views.conversation_mode, name="conversation_mode"),
    # The sidebar's folders, pins and tags (organise_pages)
    path("c/folders/new/", organise.folder_create, name="folder_create"),
    path("c/folders/<id:folder_id>/rename/", organise.folder_rename, name="folder_rename"),
    path("c/folders/<id:folder_id>/delete/", organise.folder_delete, name="folder_delete"),
    path(
        "c/<id:conversation_id>/folder/", organise.conversation_folder, name="conversation_folder"
    ),
    path("c/<id:conversation_id>/pin/", organise.conversation_pin, name="conversation_pin"),
    path("c/<id:conversation_id>/tags/", organise.conversation_tags, name="conversation_tags"),
    path("runs/<id:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<id:run_id>/retry/", branch_views.run_retry, name="run_retry"),
    path("runs/<id:run_id>/resume/", branch_views.run_resume, name="run_resume"),
    path("runs/<id:run_id>/regenerate/", branch_views.run_regenerate, name="run_regenerate"),
    path("runs/<id:run_id>/select/", branch_views.run_select, name="run_select"),
    path("m/<id:message_id>/", branch_views.message_show, name="message_show"),
    path("m/<id:message_id>/edit/", branch_views.message_edit, name="message_edit"),
    path("m/<id:message_id>/select/", branch_views.message_select, name="message_select"),
    path("runs/<id:run_id>/approvals/<str:call_id>/", views.run_approval, name="run_approval"),
    path("runs/<id:run_id>/summary/", views.run_summary, name="run_summary"),
    path("runs/<id:run_id>/artifacts/", views.run_artifacts, name="run_artifacts"),
    path("m/<id:message_id>/pin/", views.message_pin, name="message_pin"),
    path(
        "c/<id:conversation_id>/knowledge/",
        knowledge.conversation_knowledge,
        name="conversation_knowledge",
    ),
    path(
        "c/<id:conversation_id>/settings/",
        chat_settings_pages.conversation_settings,
        name="conversation_settings",
    ),
    # Knowledge bases' pages (knowledge_pages.py); passages are agentsite/urls.py's
    path("knowledge/", knowledge.knowledge_list, name="knowledge_list"),
    path("knowledge/<id:base_id>/", knowledge.knowledge_detail, name="knowledge_detail"),
    path("knowledge/<id:base_id>/delete/", knowledge.knowledge_delete, name="knowledge_delete"),
    path(
        "knowledge/<id:base_id>/documents/",
        knowledge.knowledge_documents,
        name="knowledge_documents",
    ),
    path("knowledge/<id:base_id>/upload/", knowledge.knowledge_upload, name="knowledge_upload"),
    path("knowledge/<id:base_id>/url/", knowledge.knowledge_add_url, name="knowledge_add_url"),
    path(
        "knowledge/<id:base_id>/documents/<id:document_id>/delete/",
        knowledge.knowledge_document_delete,
        name="knowledge_document_delete",
    ),
    path(
        "knowledge/<id:base_id>/documents/<id:document_id>/reindex/",
        knowledge.knowledge_document_reindex,
        name="knowledge_document_reindex",
    ),
    # Export, import and shared links (share_views)
    path(
        "c/<id:conversation_id>/export/",
        share_views.conversation_export,
        name="conversation_export",
    ),
    path("c/import/", share_views.conversation_import, name="conversation_import"),
    path(
        "c/<id:conversation_id>/share/", share_views.conversation_share, name="conversation_share"
    ),
    path("settings/", settings_pages.settings_page, name="user_settings"),
    # Presets (preset_pages.py)
    path("presets/", preset_pages.preset_list, name="preset_list"),
    path("presets/<id:preset_id>/", preset_pages.preset_edit, name="preset_edit"),
    path("presets/<id:preset_id>/delete/", preset_pages.preset_delete, name="preset_delete"),
    path("settings/shares/", share_views.share_list, name="share_list"),
    path("settings/shares/<id:share_id>/revoke/", share_views.share_revoke, name="share_revoke"),
    path("s/<str:token>/", share_views.shared_page, name="shared_page"),
    path(
        "s/<str:token>/artifacts/<id:index>/preview/",
        share_views.shared_artifact_preview,
        name="shared_artifact_preview",
    ),
    path(
        "s/<str:token>/artifacts/<id:index>/download/",
        share_views.shared_artifact_download,
        name="shared_artifact_download",
    ),
    path("s/<str:token>/files/<id:index>/", share_views.shared_file, name="shared_file"),
    path("s/<str:token>/passages/<id:index>/", share_views.shared_passage, name="shared_passage"),
]
